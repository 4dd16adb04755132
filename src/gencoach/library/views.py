"""Training views: how one canonical record becomes model examples.

`full_trajectory` gives one `FullTrajectoryExample` per record, `assistant_turns` one
`AssistantTurnExample` per trainable decision; both share the record's split and lineage.
Messages are shared with the parsed record: copy one before changing it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gencoach.library.metadata import lineage_of
from gencoach.library.records import EventKind, Trajectory

SYSTEM_EVENT_ID = "system"
Message = dict[str, Any]


@dataclass(frozen=True, slots=True)
class FullTrajectoryExample:
    """A whole trajectory as one example, with an aligned loss mask.

    `model_input` is the conversation (system message, then every instruction, tool
    feedback and decision); `event_ids` names the event behind each message; `loss_mask`
    is 1 exactly on the trainable decisions, whose ids are `target_event_ids`. Outcome,
    reward and tier are in `metadata`, never in a message.
    """

    sample_id: str
    trajectory_id: str
    split: str
    model_input: list[Message]
    tools: list[dict[str, Any]]
    event_ids: list[str]
    loss_mask: list[int]
    target_event_ids: list[str]
    metadata: dict[str, Any]
    """Task, outcome, reward, tier, rank, provenance and `lineage` (with `turn_ids`)."""

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (what `as_torch_iterable` yields)."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class AssistantTurnExample:
    """One assistant decision in its causal context.

    `context` holds only what came before it (no later event, no outcome);
    `supervised_target` is the decision's message, `target_index == len(context)`, and
    `target_event_id == metadata["lineage"]["turn_id"]` is the decision's event id. The
    turn targets of a record are exactly its full view's targets.
    """

    sample_id: str
    trajectory_id: str
    split: str
    model_input: list[Message]
    """The causal prefix: exactly `context`."""
    context: list[Message]
    tools: list[dict[str, Any]]
    supervised_target: Message
    target_index: int
    target_event_id: str
    metadata: dict[str, Any]
    """Task, provenance and `lineage` (with the decision's `turn_id`)."""

    def to_dict(self) -> dict[str, Any]:
        """A plain dict (what `as_torch_iterable` yields)."""
        return asdict(self)


Example = FullTrajectoryExample | AssistantTurnExample


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


def _task(record: Trajectory) -> dict[str, Any]:
    return {
        "task_key": record.task_key,
        "environment_key": record.environment_key,
        "benchmark": record.benchmark,
        "source_id": record.source_id,
        "demonstration_provenance": record.provenance.value,
    }


def full_trajectory(record: Trajectory) -> FullTrajectoryExample:
    """The record as one example."""
    messages, ids, mask = _conversation(record)
    targets = [event_id for event_id, bit in zip(ids, mask, strict=True) if bit]
    return FullTrajectoryExample(
        sample_id=record.id,
        trajectory_id=record.id,
        split=record.split.value,
        model_input=messages,
        tools=record.tools,
        event_ids=ids,
        loss_mask=mask,
        target_event_ids=targets,
        metadata={
            **_task(record),
            "outcome": record.outcome.value,
            "reward": record.reward,
            "quality_tier": record.quality_tier.value,
            "quality_rank": record.rank,
            "descendant_score": record.descendant_score,
            "lineage": {**lineage_of(record), "turn_ids": targets},
        },
    )


def assistant_turns(record: Trajectory) -> list[AssistantTurnExample]:
    """One example per trainable decision of the record, in order."""
    messages, ids, mask = _conversation(record)
    lineage = lineage_of(record)
    task = _task(record)
    examples: list[AssistantTurnExample] = []
    for index, bit in enumerate(mask):
        if not bit:
            continue
        context = messages[:index]
        examples.append(
            AssistantTurnExample(
                sample_id=f"{record.id}/{ids[index]}",
                trajectory_id=record.id,
                split=record.split.value,
                model_input=context,
                context=context,
                tools=record.tools,
                supervised_target=messages[index],
                target_index=index,
                target_event_id=ids[index],
                metadata={**task, "lineage": {**lineage, "turn_id": ids[index]}},
            )
        )
    return examples
