"""`best_of`: per task, the k best examples across saves.

Only examples the format keeps (those that give a row) are ranked, so a task whose
best-scored answer cannot be a training target (say, every call of it failed) keeps its
next best instead of losing its only row. Between equal scores the higher env reward of
the answer's own execution (`execution.reward`, 0 when absent) ranks first, then the
newest: the save whose run started last, then the later answer (the higher candidate
id) in it.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from gencoach.export.selection import Example
from gencoach.export.sources import Save
from gencoach.export.splits import Task

Kept = set[tuple[str, int]]
"""(save name, candidate id) of the examples kept."""


def _age(save: Save) -> float:
    """Minus the run's start (Unix time): smaller is newer; unknown starts are oldest."""
    return float("inf") if save.started is None else -save.started


@dataclass(frozen=True)
class _Ranked:
    """An example's rank in its task; the heap keeps the worst kept one on top."""

    key: tuple[float, float, float, int, str]
    """(-score, -reward, age, -candidate, save): smaller is better."""

    def __lt__(self, other: _Ranked) -> bool:
        return self.key > other.key


class BestOf:
    """The k best examples of each task, fed save by save."""

    def __init__(self, k: int) -> None:
        self.k = k
        self._best: dict[Task, list[_Ranked]] = {}

    def offer(self, save: Save, examples: list[Example]) -> None:
        """Rank a save's (kept) examples against its task's best so far."""
        heap = self._best.setdefault(save.task, [])
        age = _age(save)
        for example in examples:
            key = (-example.score, -example.reward, age, -example.candidate_id, save.name)
            ranked = _Ranked(key)
            if len(heap) < self.k:
                heapq.heappush(heap, ranked)
            elif ranked.key < heap[0].key:
                heapq.heapreplace(heap, ranked)

    def kept(self) -> Kept:
        """Every example kept, as (save name, candidate id)."""
        return {(r.key[4], -r.key[3]) for heap in self._best.values() for r in heap}
