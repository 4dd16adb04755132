"""Training views: how one canonical record becomes model examples.

- `full_trajectory`: one example per record. `messages` is the model input (system
  message, then every instruction, tool feedback and decision); `event_ids` names the
  event behind each message; `loss_mask` is 1 exactly on the trainable decisions, whose
  ids are `target_event_ids`. Outcome, reward and tier are in `metadata`, never in a
  message.
- `assistant_turn`: one example per trainable decision. `context` holds only what came
  before it (no later event, no outcome); `supervised_target` is the decision's message
  and `target_index == len(context)`; `lineage["turn_id"]` is the decision's event id.

Both come from the same record, so they share its split and lineage, and the turn
targets are exactly the full view's targets. Messages are shared with the parsed record:
copy one before changing it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gencoach.library.records import EventKind, Trajectory

SYSTEM_EVENT_ID = "system"
Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class FullTrajectoryExample:
    """A whole trajectory as one example, with an aligned loss mask."""

    id: str
    trajectory_id: str
    split: str
    messages: list[Message]
    tools: list[dict[str, Any]]
    event_ids: list[str]
    loss_mask: list[int]
    target_event_ids: list[str]
    metadata: dict[str, Any]
    lineage: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (what `as_torch_iterable` yields)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class AssistantTurnExample:
    """One assistant decision in its causal context."""

    id: str
    trajectory_id: str
    split: str
    context: list[Message]
    tools: list[dict[str, Any]]
    supervised_target: Message
    target_index: int
    metadata: dict[str, Any]
    lineage: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (what `as_torch_iterable` yields)."""
        return asdict(self)


Example = FullTrajectoryExample | AssistantTurnExample


def _lineage(record: Trajectory) -> dict[str, Any]:
    return {
        "trajectory_id": record.id,
        "source_id": record.source_id,
        "source_revision": record.source_revision,
        "locator": record.locator,
        "request_ids": record.coaching.get("request_ids", []),
        "attempt_ids": record.coaching.get("attempt_ids", []),
    }


def _conversation(record: Trajectory) -> tuple[list[Message], list[str], list[int]]:
    messages: list[Message] = []
    ids: list[str] = []
    mask: list[int] = []
    if record.system:
        messages.append({"role": "system", "content": record.system})
        ids.append(SYSTEM_EVENT_ID)
        mask.append(0)
    decision = EventKind.DECISION.value
    for event in record.events:
        message = event.get("message")
        if message is None:
            continue
        messages.append(message)
        ids.append(event["id"])
        mask.append(1 if event["kind"] == decision and event["trainable"] else 0)
    return messages, ids, mask


def full_trajectory(record: Trajectory) -> FullTrajectoryExample:
    """The record as one example."""
    messages, ids, mask = _conversation(record)
    return FullTrajectoryExample(
        id=record.id,
        trajectory_id=record.id,
        split=record.split.value,
        messages=messages,
        tools=record.tools,
        event_ids=ids,
        loss_mask=mask,
        target_event_ids=[event_id for event_id, bit in zip(ids, mask, strict=True) if bit],
        metadata={
            "task_key": record.task_key,
            "environment_key": record.environment_key,
            "outcome": record.outcome.value,
            "reward": record.reward,
            "quality_tier": record.quality_tier.value,
            "rank": record.rank,
            "provenance": record.provenance.value,
            "descendant_score": record.descendant_score,
        },
        lineage=_lineage(record),
    )


def assistant_turns(record: Trajectory) -> list[AssistantTurnExample]:
    """One example per trainable decision of the record, in order."""
    messages, ids, mask = _conversation(record)
    lineage = _lineage(record)
    examples: list[AssistantTurnExample] = []
    for index, bit in enumerate(mask):
        if not bit:
            continue
        examples.append(
            AssistantTurnExample(
                id=f"{record.id}/{ids[index]}",
                trajectory_id=record.id,
                split=record.split.value,
                context=messages[:index],
                tools=record.tools,
                supervised_target=messages[index],
                target_index=index,
                metadata={
                    "task_key": record.task_key,
                    "environment_key": record.environment_key,
                    "provenance": record.provenance.value,
                },
                lineage={**lineage, "turn_id": ids[index]},
            )
        )
    return examples
