"""The run's branches: the situations they restart from, how many run, what they may spend.

Branch orders name an anchor situation by its generator id; the book keeps, for every
situation of the run (and every coached situation gencoach recorded), its world state,
its environment and the coaching attempts of its lineage.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import anyio

from gencoach.sim.episode import EpisodeState


@dataclass(frozen=True)
class SavedSituation:
    """What a branch needs to restart from a situation."""

    state: EpisodeState
    env: int
    attempt_ids: tuple[int, ...] = ()


class SituationBook:
    """The run's situations by generator id."""

    def __init__(self) -> None:
        self._saved: dict[str, SavedSituation] = {}

    def save(self, situation_id: str, saved: SavedSituation) -> None:
        """Remember a situation."""
        self._saved[situation_id] = saved

    def get(self, situation_id: str) -> SavedSituation | None:
        """The saved situation, or None for an id this run never saw."""
        return self._saved.get(situation_id)

    def __len__(self) -> int:
        return len(self._saved)


class Activity:
    """Counts the branches in progress; the run waits on the count to change."""

    def __init__(self) -> None:
        self.count = 0
        self._changed = anyio.Event()

    def begin(self) -> None:
        """A branch starts (call before its task is started, so no wait misses it)."""
        self.count += 1
        self._notify()

    def end(self) -> None:
        """A branch ended."""
        self.count -= 1
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    async def until(self, predicate: Callable[[int], bool]) -> None:
        """Wait until the count satisfies the predicate."""
        while not predicate(self.count):
            await self._changed.wait()


class Budget:
    """The run's wall-clock and decision budgets; once spent, no new situation is asked."""

    def __init__(self, max_decisions: int | None, max_wall_s: float | None) -> None:
        self.max_decisions = max_decisions
        self.max_wall_s = max_wall_s
        self.started = anyio.current_time()
        self.decisions = 0

    def spend(self, decisions: int = 1) -> None:
        """Count decisions the agent was asked for (every candidate, executed or not)."""
        self.decisions += decisions

    @property
    def elapsed_s(self) -> float:
        """Seconds since the run began."""
        return anyio.current_time() - self.started

    def exhausted(self) -> str | None:
        """Which budget is spent, as a reason, or None while both last."""
        if self.max_decisions is not None and self.decisions >= self.max_decisions:
            return f"decision budget of {self.max_decisions} reached"
        if self.max_wall_s is not None and self.elapsed_s >= self.max_wall_s:
            return f"wall-clock budget of {self.max_wall_s} s reached"
        return None
