"""MAGMA-GEN 2.0 saves (gencoach's and MAGMA-GEN's own) as canonical trajectories.

`SaveSource` reads a save folder, one trajectory per root-to-leaf path of its graph;
`stage_end` and `outcome_of` read how a path ended. See docs/library.md ("Sources" and
"The canonical record").
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gencoach.errors import SaveError
from gencoach.export.formats.conversation import (
    assistant_message,
    default_system_prompt,
    function_tool,
    instruction_messages,
    reasoning_of,
    system_message,
)
from gencoach.export.history import Step, is_target, trajectory
from gencoach.export.inputs import HISTORY_KEY, RULES_KEY, ModelInput
from gencoach.export.selection import score_of
from gencoach.export.sources import folder_digest
from gencoach.export.tool_failures import NO_PREDICATES, ToolFailures
from gencoach.graph import SavedGraph, read_save
from gencoach.library.errors import SourceError
from gencoach.library.records import Event, EventKind, Outcome, Provenance, VerificationStrength
from gencoach.library.sources.base import SourceAdapter, SourceContent
from gencoach.library.sources.canonical import (
    description_text,
    environment_key,
    finish,
    number_events,
    route_of,
    save_environment,
    strongest,
    task_key,
    tier_of,
    verification,
)
from gencoach.protocol import AgentInput, CandidateRecord

SCORE_DIGITS = 6
SIMULATOR_CHECKS = "simulator task checks"
_STAGE_ENDS = {
    "optimal": ("success", "optimal"),
    "suboptimal": ("success", "acceptable"),
    "unassessed": ("unknown", "unassessed"),
    "error": ("failure", "failed"),
}


# MAGMA Core's StageSuccess and StageState, by value or by name.
_SUCCESS = {1: "success", "FINISH": "success", -1: "failure", "FAILED": "failure"}
_STATES = {
    1: "optimal", "OPTIMAL": "optimal", 0: "acceptable", "ACCEPTABLE": "acceptable",
    2: "unassessed", "UNASSESSED": "unassessed", -1: "exceeded", "EXCEEDED": "exceeded",
}  # fmt: skip


def provenance_of(candidate: CandidateRecord) -> Provenance:
    """A person's correction, a coached one, or the agent's own recorded answer."""
    if candidate.coaching_source.get("origin") == "human":
        return Provenance.HUMAN_CORRECTION
    if candidate.origin == "coaching":
        return Provenance.COACHED_CORRECTION
    return Provenance.RECORDED_AGENT_COMPLETION


def stage_end(candidate: CandidateRecord) -> tuple[str, str | None] | None:
    """How the candidate's execution ended its stage (result, state), or None. A step
    summary's `stage_success` and `stage_state` are read as MAGMA Core's enum values or
    names."""
    if candidate.status in _STAGE_ENDS:
        return _STAGE_ENDS[candidate.status]
    if candidate.status != "finished":
        return None
    success = candidate.execution.get("stage_success")
    result = "success" if success is True else _SUCCESS.get(_key(success))
    if result is None:
        return None
    return result, _STATES.get(_key(candidate.execution.get("stage_state")))


def _key(value: object) -> object:
    if isinstance(value, bool) or value is None:
        return None
    return value.upper() if isinstance(value, str) else value


def outcome_of(last: CandidateRecord) -> Outcome:
    """The trajectory's outcome from its last candidate: unknown stays unknown."""
    if last.response_status == "error" or last.status == "invalid":
        return Outcome.FAILURE
    end = stage_end(last)
    if end is None:
        return Outcome.ONGOING
    return {"success": Outcome.SUCCESS, "failure": Outcome.FAILURE}.get(end[0], Outcome.UNKNOWN)


def _system(source: AgentInput, single_agent: bool) -> str:
    memory = dict(source.memory)
    rules = memory.pop(RULES_KEY, None)
    history = memory.pop(HISTORY_KEY, None)
    seen = ModelInput(
        tools=list(source.tools),
        attributes=dict(source.attributes),
        rules=list(rules) if isinstance(rules, list) else [],
        history=history if isinstance(history, list) else None,
        memory=memory,
    )
    return str(system_message(default_system_prompt(single_agent), seen)["content"])


def _events(steps: list[Step], failures: ToolFailures, robots: bool) -> list[Event]:
    events: list[Event] = []
    previous: CandidateRecord | None = None
    for step in steps:
        candidate = step.candidate
        opening = instruction_messages(step.situation.input.instruction, previous, robots=robots)
        # A stage's end comes after the results of the calls that ended it.
        ended = events.pop() if events and events[-1]["kind"] == EventKind.STAGE_END else None
        for message in opening:
            if ended is not None and message["role"] != "tool":
                events.append(ended)
                ended = None
            tool = message["role"] == "tool"
            kind = EventKind.TOOL_FEEDBACK if tool else EventKind.INSTRUCTION
            events.append({"kind": kind.value, "message": message})
        decision: Event = {
            "kind": EventKind.DECISION.value,
            "message": assistant_message(candidate, robots=robots),
            "trainable": is_target(candidate, failures),
            "provenance": provenance_of(candidate).value,
            "status": candidate.status,
            "attempt_ids": list(candidate.coaching_attempt_ids),
            "step": {"situation_id": step.situation.id, "candidate_id": candidate.id},
        }
        reasoning = reasoning_of(candidate)
        if reasoning:
            decision["reasoning"] = reasoning
        events.append(decision)
        end = stage_end(candidate)
        if end is not None:
            events.append(
                {
                    "kind": EventKind.STAGE_END.value,
                    "stage_id": candidate.stage_id,
                    "result": end[0],
                    "state": end[1],
                }
            )
        previous = candidate
    return number_events(events)


def _coaching(steps: list[Step]) -> dict[str, list[Any]]:
    requests: list[str] = []
    attempts: list[int] = []
    routes: list[str] = []
    diagnoses: list[str] = []
    for step in steps:
        candidate = step.candidate
        source = candidate.coaching_source
        request = source.get("request_id")
        if isinstance(request, str) and request not in requests:
            requests.append(request)
        attempts.extend(a for a in candidate.coaching_attempt_ids if a not in attempts)
        kind = candidate.coaching.type_coaching
        if kind is not None and candidate.origin == "coaching" and route_of(kind) not in routes:
            routes.append(route_of(kind))
        diagnosis = source.get("diagnosis")
        if isinstance(diagnosis, dict):
            diagnosis = diagnosis.get("explanation")
        if isinstance(diagnosis, str) and diagnosis and diagnosis not in diagnoses:
            diagnoses.append(diagnosis)
    return {"request_ids": requests, "attempt_ids": attempts, "routes": routes,
            "diagnoses": diagnoses}  # fmt: skip


def _verification(outcome: Outcome, last: CandidateRecord, events: list[Event]) -> dict[str, Any]:
    """The simulator's task checks decided the outcome; unknown and ongoing: no verdict.
    The evidence names the `stage_end` events (each stage's result and state) and the last
    candidate's status."""
    ends = [event["id"] for event in events if event["kind"] == EventKind.STAGE_END]
    decided = outcome in (Outcome.SUCCESS, Outcome.FAILURE)
    return verification(
        SIMULATOR_CHECKS,
        VerificationStrength.SOURCE_EVALUATOR if decided else VerificationStrength.NONE,
        {"stage_end_events": ends, "last_status": last.status},
    )


def _leaves(graph: SavedGraph) -> list[int]:
    return sorted(cid for cid, candidate in graph.candidates.items() if not candidate.links)


class SaveSource(SourceAdapter):
    """A MAGMA-GEN 2.0 save folder, read with the tools' own failure predicates.

    Every root-to-leaf path of the saved graph is one trajectory: a leaf is a candidate
    nothing follows, and a path goes through coached alternatives like through `next`
    links. Both save dialects are read: `task_description` as a string or as MAGMA-GEN's
    object, and executions as per-robot results or as MAGMA-GEN's step summary. A
    decision is trainable exactly when the chat export trains on it (`is_target`, with
    the tools' failure predicates the build was given: `--tool-failures`).
    """

    kind = "save"

    def __init__(self, path: Path, location: str, failures: ToolFailures = NO_PREDICATES) -> None:
        super().__init__(path, location)
        self.failures = failures

    def digest(self) -> str:
        """SHA-256 over `config.json` and every situation file, names and bytes."""
        return folder_digest(self.path)

    def open(self) -> SourceContent:
        """Read the whole save (checking every link), then yield one payload per path."""
        try:
            graph = read_save(self.path)
        except SaveError as error:
            raise SourceError(self.location, error.reason) from None
        return SourceContent(f"save:{graph.config.run_id}", self._payloads(graph))

    def _payloads(self, graph: SavedGraph) -> Iterator[dict[str, Any]]:
        config = graph.config
        description = description_text(config.task_description)
        environment = save_environment(config)
        generator, generator_version = environment["generator"], environment["generator_version"]
        scenario_version = environment["scenario_version"]
        for leaf in _leaves(graph):
            steps = trajectory(graph, leaf)
            last = steps[-1].candidate
            events = _events(steps, self.failures, not config.single_agent)
            outcome = outcome_of(last)
            end = stage_end(last)
            decisions = [step.candidate for step in steps]
            payload: dict[str, Any] = {
                "task_key": task_key(config.scenario, config.target, description),
                "benchmark": f"{generator}/{config.scenario}",
                "task": {"scenario": config.scenario, "target": config.target,
                         "target_kind": config.target_kind, "description": description},
                "environment_key": environment_key(
                    generator, generator_version, config.scenario, scenario_version
                ),
                "environment": {"generator": generator, "generator_version": generator_version,
                                "format_version": config.generator_version,
                                "scenario": config.scenario, "scenario_version": scenario_version},
                "source_id": f"save:{config.run_id}",
                "source_revision": self.revision,
                "source_split": None,
                "locator": {"kind": self.kind, "save": self.location, "run_id": config.run_id,
                            "situation_ids": [step.situation.id for step in steps],
                            "candidate_ids": [c.id for c in decisions]},
                "agent": {"id": config.agent_id, "version": config.agent_version,
                          "model": "unknown"},
                "system": _system(steps[0].situation.input, config.single_agent),
                "tools": [
                    function_tool(tool, robots=not config.single_agent)
                    for tool in steps[0].situation.input.tools
                ],
                "events": events,
                "outcome": outcome.value,
                "reward": round(score_of(last.score), SCORE_DIGITS),
                "verification": _verification(outcome, last, events),
                "descendant_score": {k: v.model_dump(by_alias=True) for k, v in last.score.items()},
                "quality_tier": tier_of(outcome, end[1] if end else None).value,
                "provenance": strongest([provenance_of(c) for c in decisions]).value,
                "coaching": _coaching(steps),
                "curated_selections": [],
            }  # fmt: skip
            yield finish(payload)
