"""Deterministic sampling over selected index rows: same rows + config → same ordered ids.

`SamplingConfig` says how many rows to draw, from which seed and how
(`SamplingStrategy`); `sample` draws them. See docs/library.md ("Sampling").
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from gencoach.library.errors import QueryError
from gencoach.library.metadata import TrajectoryMetadata
from gencoach.library.query import ALIASES, coerce


class SamplingStrategy(StrEnum):
    """How draws are spread: over trajectories, over tasks, or across sources.

    `uniform`: every selected trajectory equally likely. `task` (also `by_task`): tasks
    are drawn equally, each drawn task represented by its best attempt among the selected
    rows (lowest task rank). `source_balanced`: sources take turns (round robin, sources
    in sorted order), each drawing from its own seeded shuffle; a source that runs out
    leaves its turns to the others, so the count is still reached while any source has
    rows left.
    """

    UNIFORM = "uniform"
    TASK = "task"
    SOURCE_BALANCED = "source_balanced"


ALIASES[SamplingStrategy] = {"by_task": "task", "source-balanced": "source_balanced"}


@dataclass(frozen=True)
class SamplingConfig:
    """How many rows to draw, from which seed, how, and whether a row may repeat. With
    replacement, draws repeat freely and `count` is always reached (given any rows)."""

    count: int
    seed: int = 0
    strategy: SamplingStrategy = SamplingStrategy.UNIFORM
    with_replacement: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.count, bool) or not isinstance(self.count, int) or self.count < 0:
            raise QueryError("count", f"must be a non-negative integer, got {self.count!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise QueryError("seed", f"must be an integer, got {self.seed!r}")
        object.__setattr__(self, "strategy", coerce(SamplingStrategy, self.strategy, "strategy"))


def _rng(config: SamplingConfig, *salt: str) -> random.Random:
    return random.Random(":".join([str(config.seed), config.strategy.value, *salt]))


def _draw(rows: Sequence[TrajectoryMetadata], config: SamplingConfig) -> list[TrajectoryMetadata]:
    rng = _rng(config)
    if not rows:
        return []
    if config.with_replacement:
        return rng.choices(rows, k=config.count)
    return rng.sample(list(rows), min(config.count, len(rows)))


def _by_task(
    rows: Sequence[TrajectoryMetadata], config: SamplingConfig
) -> list[TrajectoryMetadata]:
    best: dict[str, TrajectoryMetadata] = {}
    for row in rows:
        held = best.get(row.task_key)
        if held is None or (row.task_rank, row.trajectory_id) < (
            held.task_rank,
            held.trajectory_id,
        ):
            best[row.task_key] = row
    return _draw([best[task] for task in sorted(best)], config)


def _source_balanced(
    rows: Sequence[TrajectoryMetadata], config: SamplingConfig
) -> list[TrajectoryMetadata]:
    groups: dict[str, list[TrajectoryMetadata]] = {}
    for row in rows:
        groups.setdefault(row.source_id, []).append(row)
    queues: list[list[TrajectoryMetadata]] = []
    for source in sorted(groups):
        members = groups[source]
        _rng(config, source).shuffle(members)
        queues.append(members)
    drawn: list[TrajectoryMetadata] = []
    if config.with_replacement:
        pickers = [_rng(config, "replace", source) for source in sorted(groups)]
        while queues and len(drawn) < config.count:
            for queue, picker in zip(queues, pickers, strict=True):
                if len(drawn) == config.count:
                    break
                drawn.append(picker.choice(queue))
        return drawn
    position = 0
    while queues and len(drawn) < config.count:
        live = [queue for queue in queues if position < len(queue)]
        if not live:
            break
        for queue in live:
            if len(drawn) == config.count:
                break
            drawn.append(queue[position])
        position += 1
    return drawn


def sample(rows: Sequence[TrajectoryMetadata], config: SamplingConfig) -> list[TrajectoryMetadata]:
    """Draw from `rows` (in canonical order) as `config` says."""
    if config.strategy is SamplingStrategy.TASK:
        return _by_task(rows, config)
    if config.strategy is SamplingStrategy.SOURCE_BALANCED:
        return _source_balanced(rows, config)
    return _draw(rows, config)
