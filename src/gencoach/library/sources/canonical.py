"""Assembling a canonical payload: keys, content id, tier and eligibility, for every adapter."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from gencoach.library.records import (
    Event,
    EventKind,
    Outcome,
    Provenance,
    QualityTier,
    VerificationStrength,
)

if TYPE_CHECKING:
    from gencoach.protocol import RunConfig

_PROVENANCE_STRENGTH = {
    Provenance.RECORDED_AGENT_COMPLETION: 0,
    Provenance.COACHED_CORRECTION: 1,
    Provenance.HUMAN_CORRECTION: 2,
    Provenance.EXPERT_OR_REFERENCE_DEMONSTRATION: 3,
}
# The coaching types gencoach writes (`<event>:<focus>`), by the route that opens them.
_ROUTES = {
    "format_error:format_fix": "format",
    "failure:diagnosis": "failure",
    "no_action:diagnosis": "no_action",
    "exceeded:diagnosis": "exceeded",
    "finish_suboptimal:suboptimal_diagnosis": "suboptimal",
    "failure:text_only_rewrite": "text_rewrite",
}
_EVENT_ROUTES = {"format_error": "format", "finish_suboptimal": "suboptimal"}


def route_of(type_coaching: str) -> str:
    """The route name of a coaching type (`failure:diagnosis` → `failure`)."""
    if type_coaching in _ROUTES:
        return _ROUTES[type_coaching]
    event = type_coaching.split(":", 1)[0]
    return _EVENT_ROUTES.get(event, event)


def description_text(value: object) -> str:
    """The task text of a `task_description`: a string, or MAGMA-GEN's object (as a mapping
    or a model) whose text, when it has none, is its stages' goals in order."""
    if isinstance(value, str):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        value = dump(mode="json")
    if not isinstance(value, dict):
        return ""
    inner = value.get("task_description")
    if isinstance(inner, str):
        return inner
    stages = value.get("stages_description")
    goals = [
        str(stage.get("goal_description", "")) if isinstance(stage, dict) else str(stage)
        for stage in (stages if isinstance(stages, list) else [])
    ]
    return " / ".join(goal for goal in goals if goal)


def _short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def task_key(scenario: str, target: str, task_description: object) -> str:
    """`scenario/target/<hash of the task text>`: readable, and exact about the text.

    `task_description` is a save's (a string or MAGMA-GEN's object, see `description_text`).
    Saves, the rows `gencoach export` writes (their `task_key`) and the chat source all
    name a task by this one function, so a task has one split whatever the source.
    """
    return f"{scenario}/{target}/{_short_hash(description_text(task_description))}"


def environment_key(generator: str, generator_version: str, scenario: str, version: str) -> str:
    """`generator@version/scenario@scenario_version`."""
    return f"{generator}@{generator_version}/{scenario}@{version}"


def save_environment(config: RunConfig) -> dict[str, str]:
    """What a save says of its environment: the generator that produced it (its
    `producer`, else `magma-gen` and the format version), the scenario and its version
    (`env_options.scenario_version`, else `unversioned`).

    Saves and the rows `gencoach export` writes from them (their `generator` and
    `scenario_version`) both take it from here, so a task read from either has one
    benchmark (`generator/scenario`) and one environment key."""
    producer = config.producer
    return {
        "generator": producer.package if producer is not None else "magma-gen",
        "generator_version": producer.version if producer is not None else config.generator_version,
        "scenario": config.scenario,
        "scenario_version": str(config.env_options.get("scenario_version", "unversioned")),
    }


def verification(
    method: str, strength: VerificationStrength, evidence: dict[str, Any]
) -> dict[str, Any]:
    """How a source established a trajectory's outcome (nothing is replayed by gencoach)."""
    return {"method": method, "strength": strength.value, "independently_replayed": False,
            "evidence": evidence}  # fmt: skip


def contributor_id(source_id: str, locator: str) -> str:
    """The id of one source trajectory (its source id and locator, as JSON text)."""
    return "t" + hashlib.sha256(f"{source_id}\n{locator}".encode()).hexdigest()[:31]


def strongest(provenances: list[Provenance]) -> Provenance:
    """The trajectory's provenance: the strongest correction any decision carries."""
    return max(
        provenances,
        key=lambda item: _PROVENANCE_STRENGTH[item],
        default=Provenance.RECORDED_AGENT_COMPLETION,
    )


def tier_of(outcome: Outcome, final_state: str | None) -> QualityTier:
    """The quality tier of an outcome and the state the last stage ended in."""
    if outcome is Outcome.SUCCESS:
        return QualityTier.OPTIMAL if final_state == "optimal" else QualityTier.ACCEPTABLE
    if outcome is Outcome.FAILURE:
        return QualityTier.FAILED
    return QualityTier.UNVERIFIED


def _unanswered(spoken: list[Event]) -> list[str]:
    """Where the tool calls and the tool messages do not pair up: each call of a decision
    is answered by exactly one tool message before anything else is said (the calls of
    the last decision may end the trajectory unanswered: they are its target)."""
    reasons: list[str] = []
    pending: list[str] = []
    answered: set[str] = set()
    for event in spoken:
        message = event["message"]
        if event["kind"] == EventKind.TOOL_FEEDBACK:
            call = message.get("tool_call_id")
            if call in pending:
                pending.remove(call)
                answered.add(call)
            elif call in answered:
                reasons.append(f"tool feedback {event['id']} answers call {call} a second time")
            else:
                reasons.append(
                    f"tool feedback {event['id']} answers no call of the decision before it"
                )
            continue
        if pending:
            reasons.append(
                f"{event['kind']} {event['id']} comes before tool call(s) {', '.join(pending)} "
                "are answered"
            )
        pending, answered = [], set()
        if event["kind"] == EventKind.DECISION:
            pending = [call["id"] for call in message.get("tool_calls", [])]
    return reasons


def eligibility(events: list[Event], outcome: Outcome) -> dict[str, Any]:
    """Structural soundness and training eligibility, with the reasons against."""
    reasons: list[str] = []
    spoken = [event for event in events if "message" in event]
    decisions = [event for event in events if event["kind"] == EventKind.DECISION]
    if not decisions:
        reasons.append("no assistant decision")
    if spoken and spoken[0]["kind"] == EventKind.DECISION:
        reasons.append("starts with an assistant decision")
    reasons.extend(
        f"decision {event['id']} is empty: no content and no tool call"
        for event in decisions
        if not event["message"].get("content") and not event["message"].get("tool_calls")
    )
    reasons.extend(_unanswered(spoken))
    structural = not reasons
    if not any(event["trainable"] for event in decisions):
        reasons.append("no trainable decision")
    if outcome is Outcome.FAILURE:
        reasons.append("ended in failure")
    return {"structural": structural, "training": not reasons, "reasons": reasons}


def content_id(payload: dict[str, Any]) -> str:
    """A stable id from the content alone, so the same trajectory from two sources is one."""
    content = {
        "task_key": payload["task_key"],
        "environment_key": payload["environment_key"],
        "system": payload["system"],
        "tools": payload["tools"],
        "events": [{k: v for k, v in event.items() if k != "step"} for event in payload["events"]],
        "outcome": payload["outcome"],
    }
    text = json.dumps(content, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "t" + hashlib.sha256(text.encode()).hexdigest()[:31]


def number_events(events: list[Event]) -> list[Event]:
    """Give each event its id (`e0`, `e1`, …) in order, first among its keys."""
    return [{"id": f"e{index}", **event} for index, event in enumerate(events)]


def finish(payload: dict[str, Any]) -> dict[str, Any]:
    """Complete a payload with its eligibility and content id (first key)."""
    outcome = Outcome(payload["outcome"])
    payload["eligibility"] = eligibility(payload["events"], outcome)
    return {"id": content_id(payload), **payload}
