"""What the index knows of a trajectory (`TrajectoryMetadata`), a source's permission audit
(`PermissionRecord`), and `DatasetRecord`: the metadata joined with the parsed payload.

Metadata comes from `index.sqlite` alone, so a metadata query never needs a payload and
lists records whose payload is not readable (`content_availability` says so).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from gencoach.library.records import PERMISSION_DIMENSIONS, Trajectory


@dataclass(frozen=True)
class PermissionRecord:
    """The permission audit of one source, as given at build time (`--permissions`).

    `dimensions` maps each of `research`, `model_training`, `commercial_training` and
    `transformed_redistribution` to `permitted`, `conditional`, `prohibited` or `unknown`;
    a source nobody audited has `unknown` everywhere, never an invented value.
    """

    source_id: str
    dimensions: dict[str, str]
    training_verification: str = "unknown"
    """Whether the training permission was verified: `verified`, `unverified`, `unknown`."""
    conditions: tuple[str, ...] = ()
    audit: dict[str, Any] = field(default_factory=dict)
    """Free-form audit notes (who, when, the licence text's address)."""

    @classmethod
    def unknown(cls, source_id: str) -> PermissionRecord:
        """The audit of a source nobody audited."""
        return cls(source_id, dict.fromkeys(PERMISSION_DIMENSIONS, "unknown"))


class TrajectoryMetadata(NamedTuple):
    """One trajectory as the index describes it; every field the consumer filters on."""

    trajectory_id: str
    task_key: str
    environment_key: str
    benchmark: str
    """The benchmark family: for a save, `generator/scenario`."""
    scenario: str
    target: str
    source_id: str
    source_version: str
    """The immutable revision of the source: the SHA-256 of its bytes."""
    source_split: str | None
    """The split the source itself gave, if any."""
    source_locator: str
    """Where in the source (JSON text; `lineage()` gives it as an object)."""
    agent_model: str
    agent_scaffold: str
    """`agent_id@agent_version` of the producing agent."""
    demonstration_provenance: str
    outcome_category: str
    """`success`, `failure`, `ongoing` or `unknown`."""
    reward: float | None
    quality_tier: str
    quality_rank: int
    """The rank within the task/environment group, over the whole library."""
    task_rank: int
    """The rank within the whole task."""
    split: str
    structurally_eligible: bool
    training_eligible: bool
    verification_method: str
    verification_strength: str
    independently_replayed: bool
    decisions: int
    targets: int
    """How many trainable decisions; 0: the record gives no example in either view."""
    curated_selections: tuple[str, ...]
    content_availability: str
    """`hosted`, `overlay` or `metadata_only`, as this adapter opened the library."""
    permissions: PermissionRecord
    contributing_trajectory_ids: tuple[str, ...]
    """Every source trajectory id collapsed into this record (one when not duplicated)."""
    contributions: int
    shard: str
    """Where the payload is in the library ("" when the source was indexed metadata-only)."""
    offset: int
    length: int

    @property
    def quality_score(self) -> float | None:
        """The numeric quality score: the reward (for a save, the selection score)."""
        return self.reward

    @property
    def supported_views(self) -> tuple[str, ...]:
        """The training views the record gives examples of (none without a target)."""
        return ("full_trajectory", "assistant_turn") if self.targets else ()


@dataclass(frozen=True)
class DatasetRecord:
    """A selected trajectory: its `metadata` and its parsed `trajectory`."""

    metadata: TrajectoryMetadata
    trajectory: Trajectory

    def lineage(self) -> dict[str, Any]:
        """Where the record comes from and how its outcome is known, as plain data."""
        return lineage_of(self.trajectory)


def lineage_of(record: Trajectory) -> dict[str, Any]:
    """The complete source reference, producer, source outcome and verification evidence."""
    verification = record.verification
    return {
        "trajectory_id": record.id,
        "task_key": record.task_key,
        "environment_key": record.environment_key,
        "source": {
            "source_id": record.source_id,
            "source_version": record.source_revision,
            "benchmark": record.benchmark,
            "source_split": record.source_split,
            "locator": record.locator,
        },
        "contributors": [
            {
                "trajectory_id": c.trajectory_id,
                "source_id": c.source_id,
                "source_version": c.source_revision,
                "locator": c.locator,
            }
            for c in record.contributors
        ],
        "producer": {
            "agent": record.agent,
            "environment": record.environment,
            "demonstration_provenance": record.provenance.value,
        },
        "outcome": {
            "category": record.outcome.value,
            "success": record.outcome.success,
            "reward": record.reward,
        },
        "verification": {
            "method": verification.method,
            "strength": verification.strength.value,
            "independently_replayed": verification.independently_replayed,
            "evidence": verification.evidence,
        },
        "coaching": record.coaching,
    }
