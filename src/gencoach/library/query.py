"""`DatasetQuery`: which trajectories a consumer asks for (OR within a field, AND across).

Every field is a tuple of accepted values; an empty tuple accepts everything. Fields
with a closed vocabulary take the enum or its string value, and `selection` and the
views also take the short aliases (`all`, `successful`, `best`; `full`, `turn`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from enum import StrEnum
from typing import Any, TypeVar

from gencoach.library.errors import QueryError
from gencoach.library.records import Outcome, Provenance, QualityTier, Split

E = TypeVar("E", bound=StrEnum)


class Selection(StrEnum):
    """How many trajectories per task: all, the successful ones, or the best successful one."""

    ALL_ATTEMPTS = "all_attempts"
    ALL_SUCCESSFUL = "all_successful"
    BEST_VERIFIED = "best_verified"


class TrainingView(StrEnum):
    """How a record becomes examples: the whole trajectory, or one per assistant decision."""

    FULL_TRAJECTORY = "full_trajectory"
    ASSISTANT_TURN = "assistant_turn"


ALIASES: dict[type[StrEnum], dict[str, str]] = {
    Selection: {"all": "all_attempts", "successful": "all_successful", "best": "best_verified"},
    TrainingView: {"full": "full_trajectory", "turn": "assistant_turn"},
}


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
    "provenance": Provenance,
    "outcomes": Outcome,
    "quality_tiers": QualityTier,
    "views": TrainingView,
}


def _values(value: object, field: str) -> tuple[Any, ...]:
    if value is None:
        return ()
    if isinstance(value, str | StrEnum):
        return (value,)
    if isinstance(value, Iterable):
        return tuple(value)
    raise QueryError(field, f"expected a value or a list of values, got {value!r}")


@dataclass(frozen=True)
class DatasetQuery:
    """A selection of trajectories; see the module docstring for the matching rules."""

    scenarios: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    task_keys: tuple[str, ...] = ()
    environment_keys: tuple[str, ...] = ()
    source_ids: tuple[str, ...] = ()
    source_revisions: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    """`agent_id` or `agent_id@agent_version`."""
    splits: tuple[Split, ...] = ()
    provenance: tuple[Provenance, ...] = ()
    routes: tuple[str, ...] = ()
    outcomes: tuple[Outcome, ...] = ()
    quality_tiers: tuple[QualityTier, ...] = ()
    views: tuple[TrainingView, ...] = ()
    selection: Selection = Selection.ALL_ATTEMPTS
    structural_only: bool = False
    training_only: bool = False
    excluded_splits: tuple[Split, ...] = ()

    def __post_init__(self) -> None:
        for spec in fields(self):
            name = spec.name
            value = getattr(self, name)
            if name == "selection":
                object.__setattr__(self, name, coerce(Selection, value, name))
            elif name in ("structural_only", "training_only"):
                if not isinstance(value, bool):
                    raise QueryError(name, f"expected true or false, got {value!r}")
            elif name in _ENUM_FIELDS or name == "excluded_splits":
                kind = _ENUM_FIELDS.get(name, Split)
                members = tuple(coerce(kind, item, name) for item in _values(value, name))
                object.__setattr__(self, name, tuple(dict.fromkeys(members)))
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
        """A query with the structural and training gates, never `protected_evaluation`."""
        splits = _values(criteria.get("splits"), "splits")
        if any(coerce(Split, item, "splits") is Split.PROTECTED_EVALUATION for item in splits):
            raise QueryError("splits", "protected_evaluation is never used for training")
        excluded = _values(criteria.pop("excluded_splits", ()), "excluded_splits")
        return cls(
            **criteria,
            structural_only=True,
            training_only=True,
            excluded_splits=(*excluded, Split.PROTECTED_EVALUATION),
        )
