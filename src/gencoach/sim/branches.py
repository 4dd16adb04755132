"""The run's branches: the situations they restart from, how many run, what they may spend.

Branch orders name an anchor situation by its generator id; the book keeps, for every
situation of the run (and every coached situation gencoach recorded), its world state,
its environment and the coaching attempts of its lineage.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from gencoach.protocol.branches import BranchAnchor
from gencoach.sim.episode import EpisodeState


@dataclass(frozen=True)
class SavedSituation:
    """What a branch needs to restart from a situation."""

    state: EpisodeState
    env: int
    attempt_ids: tuple[int, ...] = ()
    faulty: str | None = None
    """The first candidate with a seeded mistake in the stage so far (see `Node.faulty`)."""


class SituationBook:
    """The run's situations by generator id, and the states after decisions that ended
    their stage without success (where a recovery from such a decision restarts)."""

    def __init__(self) -> None:
        self._saved: dict[str, SavedSituation] = {}
        self._after: dict[str, SavedSituation] = {}

    def save(self, situation_id: str, saved: SavedSituation) -> None:
        """Remember a situation."""
        self._saved[situation_id] = saved

    def save_after(self, candidate_id: str, saved: SavedSituation) -> None:
        """Remember the state after a candidate whose execution ended its stage."""
        self._after[candidate_id] = saved

    def get(self, situation_id: str) -> SavedSituation | None:
        """The saved situation, or None for an id this run never saw."""
        return self._saved.get(situation_id)

    def anchor(self, anchor: BranchAnchor) -> SavedSituation | None:
        """The state a branch order restores: after its `after_candidate_id` when set (a
        situation gencoach built), else its situation's; None for one this run never saw."""
        if anchor.after_candidate_id is not None:
            return self._after.get(anchor.after_candidate_id)
        return self._saved.get(anchor.situation_id)

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

    def poke(self) -> None:
        """Wake the waiters to look again (something else their predicate reads changed)."""
        self._notify()

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def spawn(self, tg: TaskGroup, function: Callable[..., Awaitable[None]], *args: Any) -> None:
        """Start a branch in the task group, counted from now until it returns."""
        self.begin()

        async def branch() -> None:
            try:
                await function(*args)
            finally:
                self.end()

        tg.start_soon(branch)

    async def until(self, predicate: Callable[[int], bool]) -> None:
        """Wait until the count satisfies the predicate."""
        while not predicate(self.count):
            await self._changed.wait()


class SettledRun(Protocol):
    """A run that can ask gencoach whether it is settled (an `AsyncReporter`, a `EventSender`)."""

    @property
    def settled(self) -> bool:
        """Whether gencoach answered that no order can come through the last event sent."""

    async def ask_settled(self) -> None:
        """Send what is buffered and ask."""


async def until_run_may_end(activity: Activity, run: SettledRun, timeout_s: float) -> bool:
    """Return once no branch is busy and gencoach answered that no branch order can come
    for the run (True), or, as a bound, once no answer came `timeout_s` after every branch
    ended (False). Whoever reads the run's branch stream pokes `activity` when it reads an
    answer; an order read meanwhile starts a branch, and the run asks again when it ends."""
    while True:
        await activity.until(lambda count: count == 0)
        await run.ask_settled()
        with anyio.move_on_after(timeout_s):
            await activity.until(lambda count: count > 0 or run.settled)
        if activity.count == 0:
            return run.settled


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
