"""The canonical trajectory record and the closed vocabularies it is described with.

`Trajectory` joins a record's payload with the facts the index holds library-wide; the
enums (`Outcome`, `Provenance`, `QualityTier`, ...) name its values. See docs/library.md
("The canonical record").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

Event = dict[str, Any]
"""One event: `id`, `kind` (an `EventKind`), and per kind the fields the format lists."""


class Outcome(StrEnum):
    """How a trajectory ended; `unknown` stays unknown and never counts as a failure."""

    SUCCESS = "success"
    FAILURE = "failure"
    ONGOING = "ongoing"
    UNKNOWN = "unknown"

    @property
    def success(self) -> bool | None:
        """True for a success, False for a failure, None when it is not known (yet)."""
        return {"success": True, "failure": False}.get(self.value)


class Provenance(StrEnum):
    """Where a trajectory's decisions come from (its `demonstration_provenance`).

    An expert's or reference demonstration is whole; otherwise the strongest correction
    on the path wins: a person's over a coached one over the agent's own recorded answer.
    """

    EXPERT_OR_REFERENCE_DEMONSTRATION = "expert_or_reference_demonstration"
    RECORDED_AGENT_COMPLETION = "recorded_agent_completion"
    COACHED_CORRECTION = "coached_correction"
    HUMAN_CORRECTION = "human_correction"


class VerificationStrength(StrEnum):
    """How strongly an outcome is established, strongest first.

    `source_evaluator`: the source's own evaluator decided it (a simulator's task checks,
    a benchmark's reward); `reported`: the source states it without evidence; `none`: no
    verdict at all. `independently_reproduced` is for a replay outside the source.
    """

    INDEPENDENTLY_REPRODUCED = "independently_reproduced"
    SOURCE_EVALUATOR = "source_evaluator"
    REPORTED = "reported"
    NONE = "none"


VERIFIED_STRENGTHS = (
    VerificationStrength.INDEPENDENTLY_REPRODUCED.value,
    VerificationStrength.SOURCE_EVALUATOR.value,
)
"""The strengths `best_verified` accepts."""


class ContentAvailability(StrEnum):
    """Whether a record's payload can be read: in the library, from an overlay, or not."""

    HOSTED = "hosted"
    OVERLAY = "overlay"
    METADATA_ONLY = "metadata_only"


class Permission(StrEnum):
    """One dimension of a source's permission audit; `unknown` when nobody audited it."""

    PERMITTED = "permitted"
    CONDITIONAL = "conditional"
    PROHIBITED = "prohibited"
    UNKNOWN = "unknown"


class AuditState(StrEnum):
    """Whether a source's training permission was verified (`training_verification`)."""

    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    UNKNOWN = "unknown"


PERMISSION_DIMENSIONS = (
    "research",
    "model_training",
    "commercial_training",
    "transformed_redistribution",
)
"""The dimensions of `PermissionRecord.dimensions`, in order."""


class QualityTier(StrEnum):
    """A trajectory's quality class, best first (its rank orders within a tier)."""

    OPTIMAL = "optimal"
    ACCEPTABLE = "acceptable"
    UNVERIFIED = "unverified"
    FAILED = "failed"


TIER_ORDER: dict[str, int] = {tier.value: order for order, tier in enumerate(QualityTier)}


class Split(StrEnum):
    """The split of a task; every trajectory and view of the task shares it."""

    TRAIN = "train"
    VALIDATION = "validation"
    TEST = "test"
    PROTECTED_EVALUATION = "protected_evaluation"


class EventKind(StrEnum):
    """What an event is; the first three carry the chat `message` the model sees."""

    INSTRUCTION = "instruction"
    TOOL_FEEDBACK = "tool_feedback"
    DECISION = "decision"
    STAGE_END = "stage_end"


_OUTCOMES = {member.value: member for member in Outcome}
_PROVENANCES = {member.value: member for member in Provenance}
_TIERS = {member.value: member for member in QualityTier}
_SPLITS = {member.value: member for member in Split}


@dataclass(frozen=True)
class Contributor:
    """One source that produced a trajectory's content, and where in it.

    `trajectory_id` is the source trajectory's own id (from its source id and locator):
    `get_trajectory` resolves it to the canonical record it was collapsed into."""

    trajectory_id: str
    source_id: str
    source_revision: str
    locator: dict[str, Any]


@dataclass(frozen=True)
class Verification:
    """How a trajectory's outcome was established, and the evidence for it."""

    method: str
    strength: VerificationStrength
    independently_replayed: bool
    evidence: dict[str, Any]

    @classmethod
    def from_payload(cls, data: dict[str, Any]) -> Verification:
        """A verification from its payload object."""
        return cls(
            method=data["method"],
            strength=VerificationStrength(data["strength"]),
            independently_replayed=bool(data["independently_replayed"]),
            evidence=data["evidence"],
        )


@dataclass(frozen=True)
class Trajectory:
    """A canonical trajectory: its payload, with the library-wide facts from the index.

    The payload (one JSON object per line of a shard) holds everything derived from its
    source alone: task, environment, agent, events, outcome, reward, tier, provenance,
    coaching lineage and eligibility. What depends on the whole library (the rank within
    its task/environment group, the split of its task, every source that contributed the
    same content) lives in the index.
    """

    id: str
    task_key: str
    task: dict[str, str]
    environment_key: str
    environment: dict[str, str]
    benchmark: str
    source_id: str
    source_revision: str
    source_split: str | None
    locator: dict[str, Any]
    agent: dict[str, str]
    system: str
    tools: list[dict[str, Any]]
    events: list[Event]
    outcome: Outcome
    reward: float | None
    verification: Verification
    descendant_score: dict[str, Any]
    quality_tier: QualityTier
    provenance: Provenance
    coaching: dict[str, list[Any]]
    eligibility: dict[str, Any]
    curated_selections: list[str]
    split: Split
    rank: int
    task_rank: int
    contributors: tuple[Contributor, ...] = field(default=())

    @classmethod
    def from_payload(
        cls,
        payload: dict[str, Any],
        *,
        split: str,
        rank: int,
        task_rank: int,
        contributors: tuple[Contributor, ...] = (),
    ) -> Trajectory:
        """A record from its shard payload and its index facts."""
        return cls(
            id=payload["id"],
            task_key=payload["task_key"],
            task=payload["task"],
            environment_key=payload["environment_key"],
            environment=payload["environment"],
            benchmark=payload["benchmark"],
            source_id=payload["source_id"],
            source_revision=payload["source_revision"],
            source_split=payload["source_split"],
            locator=payload["locator"],
            agent=payload["agent"],
            system=payload["system"],
            tools=payload["tools"],
            events=payload["events"],
            outcome=_OUTCOMES[payload["outcome"]],
            reward=payload["reward"],
            verification=Verification.from_payload(payload["verification"]),
            descendant_score=payload["descendant_score"],
            quality_tier=_TIERS[payload["quality_tier"]],
            provenance=_PROVENANCES[payload["provenance"]],
            coaching=payload["coaching"],
            eligibility=payload["eligibility"],
            curated_selections=payload["curated_selections"],
            split=_SPLITS[split],
            rank=rank,
            task_rank=task_rank,
            contributors=contributors,
        )

    @property
    def decisions(self) -> list[Event]:
        """The assistant decisions, in order."""
        return [event for event in self.events if event["kind"] == EventKind.DECISION]

    @property
    def supervised_targets(self) -> list[dict[str, Any]]:
        """The messages of the trainable decisions, in order."""
        return [event["message"] for event in self.decisions if event["trainable"]]
