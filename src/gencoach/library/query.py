"""`DatasetQuery`: which trajectories a consumer asks for (OR within a field, AND across).

`DatasetQuery` with its vocabularies `TrajectorySelection` and `TrainingView`; `coerce`
reads an enum's value or alias. See docs/library.md ("Reading").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, TypeVar

from gencoach.library.errors import QueryError
from gencoach.library.records import (
    AuditState,
    ContentAvailability,
    Outcome,
    Permission,
    Provenance,
    QualityTier,
    Split,
)

E = TypeVar("E", bound=StrEnum)


class TrajectorySelection(StrEnum):
    """How many trajectories per task: all, the successful ones, or the best verified one."""

    ALL_ATTEMPTS = "all_attempts"
    ALL_SUCCESSFUL = "all_successful"
    BEST_VERIFIED = "best_verified"


class TrainingView(StrEnum):
    """How a record becomes examples: the whole trajectory, or one per assistant decision."""

    FULL_TRAJECTORY = "full_trajectory"
    ASSISTANT_TURN = "assistant_turn"


ALIASES: dict[type[StrEnum], dict[str, str]] = {
    TrajectorySelection: {
        "all": "all_attempts", "successful": "all_successful", "best": "best_verified"
    },
    TrainingView: {
        "full": "full_trajectory", "full-trajectory": "full_trajectory",
        "turn": "assistant_turn", "assistant-turn": "assistant_turn",
    },
}  # fmt: skip


def coerce(kind: type[E], value: object, field: str) -> E:
    """`value` as a member of `kind`, by value or alias, or a QueryError naming `field`."""
    if isinstance(value, kind):
        return value
    if isinstance(value, str):
        text = ALIASES.get(kind, {}).get(value, value)
        try:
            return kind(text)
        except ValueError:
            pass
    allowed = [member.value for member in kind] + sorted(ALIASES.get(kind, {}))
    raise QueryError(field, f"unknown value {value!r}; one of: {', '.join(allowed)}")


_ENUM_FIELDS: dict[str, type[StrEnum]] = {
    "splits": Split,
    "excluded_splits": Split,
    "demonstration_provenance": Provenance,
    "outcomes": Outcome,
    "quality_tiers": QualityTier,
    "supported_views": TrainingView,
    "content_availability": ContentAvailability,
    "research_permissions": Permission,
    "training_permissions": Permission,
    "commercial_training_permissions": Permission,
    "redistribution_permissions": Permission,
    "training_verifications": AuditState,
}
_GATES = ("structurally_eligible", "training_eligible")


def _values(value: object, field: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str | StrEnum | int):
        return (value,)
    if isinstance(value, Iterable):
        return tuple(value)
    raise QueryError(field, f"expected a value or a list of values, got {value!r}")


@dataclass(frozen=True)
class DatasetQuery:
    """A selection of trajectories: OR within a field, AND across fields.

    Every field is a tuple of accepted values (one value is a one-value tuple); an empty
    tuple accepts everything. Fields with a closed vocabulary take the enum or its string
    value, and `selection` and the views also take the aliases (`all`, `successful`,
    `best`; `full`, `full-trajectory`, `turn`, `assistant-turn`). The two gates take True,
    False or None (either).
    """

    benchmarks: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    source_versions: tuple[str, ...] = ()
    agent_models: tuple[str, ...] = ()
    agent_scaffolds: tuple[str, ...] = ()
    trajectory_ids: tuple[str, ...] = ()
    task_keys: tuple[str, ...] = ()
    environment_keys: tuple[str, ...] = ()
    splits: tuple[Split, ...] = ()
    quality_tiers: tuple[QualityTier, ...] = ()
    quality_ranks: tuple[int, ...] = ()
    demonstration_provenance: tuple[Provenance, ...] = ()
    curated_selections: tuple[str, ...] = ()
    supported_views: tuple[TrainingView, ...] = ()
    content_availability: tuple[ContentAvailability, ...] = ()
    research_permissions: tuple[Permission, ...] = ()
    training_permissions: tuple[Permission, ...] = ()
    training_verifications: tuple[AuditState, ...] = ()
    commercial_training_permissions: tuple[Permission, ...] = ()
    redistribution_permissions: tuple[Permission, ...] = ()
    structurally_eligible: bool | None = None
    training_eligible: bool | None = None
    selection: TrajectorySelection = TrajectorySelection.ALL_ATTEMPTS
    # gencoach's own: its tasks' parts, agents, coaching routes, outcomes.
    scenarios: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    """`agent_id` or `agent_id@agent_version`."""
    routes: tuple[str, ...] = ()
    outcomes: tuple[Outcome, ...] = ()
    excluded_splits: tuple[Split, ...] = ()

    def __post_init__(self) -> None:
        for spec in fields(self):
            name = spec.name
            value = getattr(self, name)
            if name == "selection":
                object.__setattr__(self, name, coerce(TrajectorySelection, value, name))
            elif name in _GATES:
                if value is not None and not isinstance(value, bool):
                    raise QueryError(name, f"expected true, false or None, got {value!r}")
            elif name in _ENUM_FIELDS:
                kind = _ENUM_FIELDS[name]
                members = tuple(coerce(kind, item, name) for item in _values(value, name))
                object.__setattr__(self, name, tuple(dict.fromkeys(members)))
            elif name == "quality_ranks":
                ranks = _values(value, name)
                if not all(isinstance(r, int) and not isinstance(r, bool) for r in ranks):
                    raise QueryError(name, f"expected whole numbers, got {value!r}")
                object.__setattr__(self, name, tuple(dict.fromkeys(ranks)))
            else:
                items = _values(value, name)
                for item in items:
                    if not isinstance(item, str):
                        raise QueryError(name, f"expected strings, got {item!r}")
                object.__setattr__(self, name, tuple(dict.fromkeys(items)))
        if set(self.splits) & set(self.excluded_splits):
            both = sorted(set(self.splits) & set(self.excluded_splits))
            raise QueryError("splits", f"{', '.join(both)} asked for and excluded at once")

    @classmethod
    def for_training(cls, **criteria: Any) -> DatasetQuery:
        """A query with the structural and training gates, never `protected_evaluation`.

        The gates are about quality, not a legal permission: add the permission fields
        for a project's policy."""
        splits = _values(criteria.get("splits"), "splits")
        if any(coerce(Split, item, "splits") is Split.PROTECTED_EVALUATION for item in splits):
            raise QueryError("splits", "protected_evaluation is never used for training")
        excluded = _values(criteria.pop("excluded_splits", ()), "excluded_splits")
        return cls(
            **criteria,
            structurally_eligible=True,
            training_eligible=True,
            excluded_splits=(*excluded, Split.PROTECTED_EVALUATION),
        )
