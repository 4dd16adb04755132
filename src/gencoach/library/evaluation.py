"""Evaluation bundles: every reference a library holds for one task.

Historical outcomes are references, not scores for a new model; an unknown outcome
stays unknown (its `outcome.success` is None) and is never counted as a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gencoach.library.metadata import DatasetRecord, TrajectoryMetadata
from gencoach.library.records import VERIFIED_STRENGTHS, Outcome, Verification


@dataclass(frozen=True)
class EvaluationReference:
    """One trajectory of the task: its verdict, how it was reached, and what it answered."""

    trajectory_id: str
    metadata: TrajectoryMetadata
    outcome: Outcome
    verification: Verification
    supervised_targets: list[dict[str, Any]]

    @classmethod
    def of(cls, record: DatasetRecord) -> EvaluationReference:
        """The reference a record gives."""
        trajectory = record.trajectory
        return cls(
            trajectory_id=trajectory.id,
            metadata=record.metadata,
            outcome=trajectory.outcome,
            verification=trajectory.verification,
            supervised_targets=trajectory.supervised_targets,
        )


@dataclass(frozen=True)
class EvaluationBundle:
    """What evaluating on one task needs: the task, its split and all its references."""

    task_key: str
    task: dict[str, str]
    split: str
    environment_keys: list[str]
    references: list[EvaluationReference] = field(default_factory=list)
    """Every selected trajectory of the task, in quality order (task rank)."""
    outcomes: dict[str, int] = field(default_factory=dict)
    """How many references ended in each outcome."""

    @property
    def best(self) -> EvaluationReference | None:
        """The best verified successful reference, if the task has one."""
        return next(
            (
                reference
                for reference in self.references
                if reference.outcome is Outcome.SUCCESS
                and reference.metadata.verification_strength in VERIFIED_STRENGTHS
            ),
            None,
        )
