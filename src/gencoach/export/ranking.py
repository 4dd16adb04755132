"""`best_of`: per task, the k best examples across saves.

`BestOf` ranks the examples a format keeps, save by save, and gives those kept. See
docs/export.md (`best_of`).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from gencoach.export.selection import Example
from gencoach.export.sources import Save
from gencoach.export.splits import Task

Kept = set[tuple[str, int]]
"""(save name, candidate id) of the examples kept."""


def _age(save: Save) -> float:
    """Minus the run's start (Unix time): smaller is newer; unknown starts are oldest."""
    return float("inf") if save.started is None else -save.started


Rank = tuple[float, float, float, int, str]
"""An example's rank in its task, (-score, -reward, age, -candidate, save): smaller is
better. Between equal scores the higher env reward of the answer's own execution ranks
first, then the newest: the save whose run started last, then the later answer in it."""


class BestOf:
    """The k best examples of each task, fed save by save. Examples with one decision key
    (the same (context, answer) pair, which a deduping format trains once) take one place:
    the best ranked of them stands for all.

    Only examples the format keeps (those that give a row) are offered, so a task whose
    best-scored answer cannot be a training target (say, every call of it failed) keeps
    its next best instead of losing its only row.
    """

    def __init__(self, k: int) -> None:
        self.k = k
        self._best: dict[Task, dict[bytes | tuple[str, int], Rank]] = {}

    def offer(
        self, save: Save, examples: list[Example], keys: Sequence[bytes | None] | None = None
    ) -> None:
        """Rank a save's (kept) examples against its task's best so far (`keys`: each
        example's decision key, None where it is distinct)."""
        best = self._best.setdefault(save.task, {})
        age = _age(save)
        for index, example in enumerate(examples):
            rank = (-example.score, -example.reward, age, -example.candidate_id, save.name)
            decision = keys[index] if keys is not None else None
            place = decision if decision is not None else (save.name, example.candidate_id)
            held = best.get(place)
            if held is None or rank < held:
                best[place] = rank

    def kept(self) -> Kept:
        """Every example kept, as (save name, candidate id)."""
        kept: Kept = set()
        for best in self._best.values():
            for rank in heapq.nsmallest(self.k, best.values()):
                kept.add((rank[4], -rank[3]))
        return kept
