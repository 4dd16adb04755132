"""Conversation JSONL files as trajectories: OpenAI-style chat with tool calls (as
`gencoach export --format chat` writes it), ShareGPT and TRL rows (see `shapes`).

`ChatFileSource` reads a file; `conversation_payload` turns one row into a canonical
payload, for it and for the Hugging Face, SWE-agent and τ-bench sources.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from gencoach.library.errors import SourceError
from gencoach.library.records import Event, EventKind, Outcome, Provenance, VerificationStrength
from gencoach.library.sources.base import FileSource, SourceContent
from gencoach.library.sources.canonical import (
    description_text,
    environment_key,
    finish,
    number_events,
    route_of,
    strongest,
    task_key,
    tier_of,
    verification,
)
from gencoach.library.sources.saves import SCORE_DIGITS
from gencoach.library.sources.shapes import ROW_KEYS, canonical_tools, messages_of

_ROLES = {"system", "user", "assistant", "tool"}


def _text(content: object, where: str) -> tuple[str, str]:
    """The text of a message's content, and its thinking parts."""
    if content is None:
        return "", ""
    if isinstance(content, str):
        return content, ""
    if not isinstance(content, list):
        raise ValueError(f"{where}.content must be a string or a list of parts")
    texts: list[str] = []
    thinking: list[str] = []
    for part in content:
        if not isinstance(part, dict):
            raise ValueError(f"{where}.content holds a part that is not an object")
        if part.get("type") == "thinking" and isinstance(part.get("thinking"), str):
            thinking.append(part["thinking"])
        elif isinstance(part.get("text"), str):
            texts.append(part["text"])
    return "".join(texts), "\n\n".join(thinking)


def _tool_calls(calls: object, where: str) -> list[dict[str, Any]]:
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise ValueError(f"{where}.tool_calls must be a list")
    normalized = []
    for index, call in enumerate(calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise ValueError(f"{where}.tool_calls.{index} needs function.name")
        arguments = function.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = call.get("id")
        normalized.append(
            {
                "id": call_id if isinstance(call_id, str) else f"call_{index}",
                "type": "function",
                "function": {"name": function["name"], "arguments": arguments},
            }
        )
    return normalized


def _trainable(message: dict[str, Any], where: str) -> bool:
    """Whether an assistant message is a training target: its `trainable` or, in the
    older shape, its `weight` (0: not a target); without either it is."""
    if "trainable" in message:
        if not isinstance(message["trainable"], bool):
            raise ValueError(f"{where}.trainable must be true or false")
        return bool(message["trainable"])
    weight = message.get("weight", 1)
    if isinstance(weight, bool) or not isinstance(weight, int | float):
        raise ValueError(f"{where}.weight must be a number")
    return weight != 0


def _provenance(metadata: dict[str, Any]) -> Provenance:
    """The stated `demonstration_provenance` (or `provenance`), such as
    `expert_or_reference_demonstration`; else what the row's `origin` says."""
    stated = metadata.get("demonstration_provenance", metadata.get("provenance"))
    if stated in set(Provenance):
        return Provenance(stated)
    if metadata.get("origin") == "human":
        return Provenance.HUMAN_CORRECTION
    if metadata.get("origin") == "coaching":
        return Provenance.COACHED_CORRECTION
    return Provenance.RECORDED_AGENT_COMPLETION


def _events(messages: list[Any], metadata: dict[str, Any]) -> tuple[str, list[Event]]:
    system = ""
    events: list[Event] = []
    provenance = _provenance(metadata).value
    for index, message in enumerate(messages):
        where = f"messages.{index}"
        if not isinstance(message, dict) or message.get("role") not in _ROLES:
            raise ValueError(f"{where} needs a role: system, user, assistant or tool")
        role = message["role"]
        text, thinking = _text(message.get("content"), where)
        if role == "system":
            if events or system:
                raise ValueError(f"{where}: a system message only opens the conversation")
            system = text
        elif role == "user":
            events.append({"kind": EventKind.INSTRUCTION.value,
                           "message": {"role": "user", "content": text}})  # fmt: skip
        elif role == "tool":
            feedback: dict[str, Any] = {"role": "tool", "tool_call_id": message.get("tool_call_id")}
            if isinstance(message.get("name"), str):
                feedback["name"] = message["name"]
            feedback["content"] = text
            events.append({"kind": EventKind.TOOL_FEEDBACK.value, "message": feedback})
        else:
            answer: dict[str, Any] = {"role": "assistant", "content": text}
            calls = _tool_calls(message.get("tool_calls"), where)
            if calls:
                answer["tool_calls"] = calls
            decision: Event = {
                "kind": EventKind.DECISION.value,
                "message": answer,
                "trainable": _trainable(message, where),
                "provenance": provenance,
                "status": None,
                "attempt_ids": [],
                "step": {"message_index": index},
            }
            if thinking:
                decision["reasoning"] = thinking
            events.append(decision)
    return system, events


def _string(metadata: dict[str, Any], key: str, default: str) -> str:
    value = metadata.get(key)
    return value if isinstance(value, str) and value else default


def _reward(metadata: dict[str, Any]) -> float | None:
    reward = metadata.get("reward", metadata.get("score"))
    if isinstance(reward, bool) or not isinstance(reward, int | float):
        return None
    return round(float(reward), SCORE_DIGITS)


def _first_instruction(events: list[Event]) -> str:
    for event in events:
        if event["kind"] == EventKind.INSTRUCTION:
            return str(event["message"]["content"])
    return ""


def _verification(metadata: dict[str, Any], outcome: Outcome) -> dict[str, Any]:
    evidence = metadata.get("verification")
    if outcome is Outcome.UNKNOWN:
        return verification("none", VerificationStrength.NONE, {})
    return verification(
        "stated by the source row",
        VerificationStrength.REPORTED,
        evidence if isinstance(evidence, dict) else {},
    )


def conversation_payload(
    row: dict[str, Any], source_id: str, revision: str, locator: dict[str, Any],
    source_split: str | None = None, checked: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The canonical payload of one conversation row, in any shape `shapes` reads.

    A row is a conversation with `tools`? and `metadata`?; metadata may also sit in
    top-level keys (tinker-cookbook's shape, and the exporter's). A row's `task_key` (the
    exporter writes it) names its task; without one the key is derived from `scenario`,
    `target` and `task_description`, or the first user message. Tool-call `arguments` may
    be JSON strings or objects; content may be a string or parts (`text`, `thinking`).

    `checked` is how an adapter that knows its source's evaluator established the outcome
    (`canonical.verification`); without it a stated outcome is `reported`."""
    shape, messages = messages_of(row)
    if not isinstance(messages, list) or not messages:
        raise ValueError("needs a non-empty list of messages")
    metadata = row.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {key: value for key, value in row.items() if key not in ROW_KEYS}
    tools = canonical_tools(row.get("tools"))
    system, events = _events(messages, metadata)
    events = number_events(events)
    scenario = _string(metadata, "scenario", "unknown")
    target = _string(metadata, "target", "unknown")
    description = description_text(metadata.get("task_description")) or _first_instruction(events)
    generator = metadata.get("generator")
    generator = generator if isinstance(generator, dict) else {}
    gen_name = _string(generator, "name", "unknown")
    gen_version = _string(generator, "version", "unknown")
    scenario_version = _string(metadata, "scenario_version", "unversioned")
    outcome_text = metadata.get("outcome")
    outcome = Outcome(outcome_text) if outcome_text in set(Outcome) else Outcome.UNKNOWN
    attempts = metadata.get("attempt_ids")
    attempts = [a for a in attempts if isinstance(a, int)] if isinstance(attempts, list) else []
    route = metadata.get("route") or metadata.get("type_coaching")
    request = metadata.get("request_id")
    selections = metadata.get("curated_selections")
    selections = (
        [s for s in selections if isinstance(s, str)] if isinstance(selections, list) else []
    )
    return finish(
        {
            # The exporter writes the task's key (the one a save gives); else it is derived.
            "task_key": _string(metadata, "task_key", "")
            or task_key(scenario, target, description),
            "benchmark": _string(metadata, "benchmark", f"{gen_name}/{scenario}"),
            "task": {"scenario": scenario, "target": target,
                     "target_kind": _string(metadata, "target_kind", "unknown"),
                     "description": description},
            "environment_key": environment_key(gen_name, gen_version, scenario, scenario_version),
            "environment": {"generator": gen_name, "generator_version": gen_version,
                            "format_version": shape, "scenario": scenario,
                            "scenario_version": scenario_version},
            "source_id": source_id,
            "source_revision": revision,
            "source_split": source_split,
            "locator": {**locator,
                        **{key: metadata[key] for key in ("run_id", "situation_id", "candidate_id")
                           if key in metadata}},
            "agent": {"id": _string(metadata, "agent_id", "unknown"),
                      "version": _string(metadata, "agent_version", "unknown"),
                      "model": _string(metadata, "model", "unknown")},
            "system": system,
            "tools": tools,
            "events": events,
            "outcome": outcome.value,
            "reward": _reward(metadata),
            "verification": checked or _verification(metadata, outcome),
            "descendant_score": {},
            "quality_tier": tier_of(outcome, _string(metadata, "stage_state", "") or None).value,
            "provenance": strongest([_provenance(metadata)]).value,
            "coaching": {"request_ids": [request] if isinstance(request, str) else [],
                         "attempt_ids": attempts,
                         "routes": [route_of(route)] if isinstance(route, str) else [],
                         "diagnoses": []},
            "curated_selections": selections,
        }
    )  # fmt: skip


class ChatFileSource(FileSource):
    """A conversation JSONL file: one conversation per line. A file with one unreadable
    line is skipped whole, so a library never holds half a file."""

    kind = "chat"

    def open(self) -> SourceContent:
        """Yield a payload per line; a bad line raises `SourceError` naming it."""
        source_id = f"chat:{self.location}"
        return SourceContent(source_id, self._payloads(source_id))

    def _payloads(self, source_id: str) -> Iterator[dict[str, Any]]:
        revision = self.revision
        for number, row in self.json_lines():
            try:
                if not isinstance(row, dict):
                    raise ValueError("is not a JSON object")
                locator = {"kind": "chat", "file": self.location, "line": number}
                payload = conversation_payload(row, source_id, revision, locator)
            except ValueError as error:
                raise SourceError(self.location, f"line {number}: {error}") from None
            yield payload
