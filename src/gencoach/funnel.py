"""The coaching funnel: one definition of its counts, per row (a route, or `human`).

`gencoach status` (from `/metrics`), the console (from the request records) and `/metrics`
itself (`gencoach_requests_total`, one arrival per request and state) all count through
`Funnel`, one row's counts. Each count's definition and how they add up: docs/metrics.md.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

ROUTES = ("format", "failure", "no_action", "exceeded", "suboptimal", "text_rewrite")
HUMAN_ROW = "human"
ROWS = (*ROUTES, HUMAN_ROW)
REFUSED_PREFIX = "refused by the stage limits"
FAILED_STATES = frozenset({"declined", "abandoned", "error"})
COUNTS = (
    "seen", "skipped", "refused", "admitted", "corrected", "reinjected", "executed",
    "proven", "unproven", "failed", "open",
)  # fmt: skip
# Each count's arrival state, for those that are one state's arrivals.
_ARRIVALS = {
    "opportunity": "seen",
    "admitted": "admitted",
    "corrected": "corrected",
    "reinjected": "reinjected",
    "executed": "executed",
    "proven": "proven",
    "unproven": "unproven",
}


def funnel_row(route: str, human: bool) -> str:
    """The row a request counts in: people's interventions have their own."""
    return HUMAN_ROW if human else route


def refused_by_limits(reason: str | None) -> bool:
    """Whether a skipped request's reason says the stage limits refused it."""
    return (reason or "").startswith(REFUSED_PREFIX)


@dataclass
class Funnel:
    """One row's counts (each one's definition: docs/metrics.md)."""

    row: str
    seen: float = 0
    skipped: float = 0
    refused: float = 0
    admitted: float = 0
    corrected: float = 0
    reinjected: float = 0
    executed: float = 0
    proven: float = 0
    unproven: float = 0
    failed: float = 0

    @property
    def open(self) -> float:
        """Admitted and not ended yet."""
        return self.admitted - self.failed - self.proven - self.unproven

    def arrived(self, state: str, count: float = 1, *, refused: bool = False) -> None:
        """Count `count` arrivals of this row's requests in `state` (`refused`: a skip by
        the stage limits)."""
        if state == "skipped":
            name = "refused" if refused else "skipped"
        elif state in FAILED_STATES:
            name = "failed"
        else:
            found = _ARRIVALS.get(state)
            if found is None:
                return  # a working state (queued, diagnosing, ...): not a funnel step
            name = found
        setattr(self, name, getattr(self, name) + count)

    def counts(self) -> dict[str, float]:
        """Every count, in the funnel's order."""
        return {name: getattr(self, name) for name in COUNTS}

    def rates(self) -> dict[str, float | None]:
        """Each main step's share of the one before it (None when that one is 0)."""
        steps = ("seen", "admitted", "corrected", "executed", "proven")
        return {
            later: round(getattr(self, later) / getattr(self, earlier), 4)
            if getattr(self, earlier)
            else None
            for earlier, later in itertools.pairwise(steps)
        }
