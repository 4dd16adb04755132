"""Train/validation partitions: by task (scenario and target), or by save folder.

`--split-by task` (the default) keeps every run of a scenario and target on one side,
so nothing leaks from training into validation. `--split-by folder` is MAGMA-GEN's
rule: each save folder is a task, the folders sorted by path and shuffled with the
split seed, `round(n * ratio)` of them (Python's rounding, half to even) validating.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from dataclasses import dataclass

from gencoach.errors import ExportError
from gencoach.protocol import RunConfig


@dataclass(frozen=True, order=True)
class Task:
    """What a run was asked to do: every branch and run of it belongs to one split."""

    scenario: str
    target: str

    @classmethod
    def of(cls, config: RunConfig) -> Task:
        """The task of a save."""
        return cls(config.scenario, config.target)

    def to_json(self) -> dict[str, str]:
        """The task as the manifest lists it."""
        return {"scenario": self.scenario, "target": self.target}


@dataclass(frozen=True, order=True)
class Folder:
    """A save folder, by its path below the source (`.` for the source itself)."""

    name: str

    @property
    def path_key(self) -> str:
        """How MAGMA-GEN orders folders: by full path, the source itself first."""
        return "" if self.name == "." else "/" + self.name

    def to_json(self) -> dict[str, str]:
        """The folder as the manifest lists it."""
        return {"folder": self.name}


SplitKey = Task | Folder


@dataclass(frozen=True)
class Partition:
    """Which tasks (or folders) train and which validate, each side sorted."""

    train: tuple[SplitKey, ...]
    validation: tuple[SplitKey, ...]

    def to_json(self) -> dict[str, list[dict[str, str]]]:
        """The partition as the manifest records it."""
        return {
            "train": [task.to_json() for task in self.train],
            "validation": [task.to_json() for task in self.validation],
        }


def validation_size(tasks: int, ratio: float) -> int:
    """round(tasks * ratio), half up; at least 1 once there are 2 tasks, never all of them.

    A ratio of 0 asks for no validation split at all.
    """
    if tasks < 2 or ratio <= 0:
        return 0
    return min(tasks - 1, max(1, math.floor(tasks * ratio + 0.5)))


def partition(tasks: Iterable[Task], ratio: float, seed: int) -> Partition:
    """Shuffle the distinct tasks with `seed` and give the first ones to validation."""
    ordered = sorted(set(tasks))
    random.Random(seed).shuffle(ordered)
    count = validation_size(len(ordered), ratio)
    return Partition(
        train=tuple(sorted(ordered[count:])), validation=tuple(sorted(ordered[:count]))
    )


def check_folder_ratio(ratio: float) -> None:
    """MAGMA-GEN's split needs a ratio strictly between 0 and 1."""
    if not 0 < ratio < 1:
        raise ExportError(
            "with --split-by folder the validation ratio must be strictly between 0 and 1, "
            f"as MAGMA-GEN requires; got {ratio}"
        )


def folder_validation_size(folders: int, ratio: float) -> int:
    """MAGMA-GEN's count: `round(n * ratio)`, at least 1 from 2 folders on, never all."""
    return min(folders - 1, max(1, round(folders * ratio))) if folders > 1 else 0


def partition_folders(folders: Iterable[Folder], ratio: float, seed: int) -> Partition:
    """Every read folder, with or without rows, split exactly as MAGMA-GEN splits them."""
    check_folder_ratio(ratio)
    ordered = sorted(set(folders), key=lambda folder: folder.path_key)
    random.Random(seed).shuffle(ordered)
    count = folder_validation_size(len(ordered), ratio)
    return Partition(
        train=tuple(sorted(ordered[count:])), validation=tuple(sorted(ordered[:count]))
    )
