"""The coaching funnel and job statistics, read from the request records the controller
keeps in Redis.

`route_funnels` counts every route's funnel (`RouteFunnel`) as `gencoach status` and
`/metrics` do; `job_stats` gives each kind of job's calls, errors and latency (`JobStats`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import quantiles

from gencoach.funnel import ROWS, Funnel, funnel_row, refused_by_limits
from gencoach.service.coaching.requests import CoachingRequest

# Which worker calls a job makes: an LLM (diagnosis, rewrite) or the agent (repair).
JOB_CALLS = {"diagnosis": "llm", "rewrite": "llm", "repair": "agent"}
FAILED_JOBS = frozenset({"error", "abandoned"})


@dataclass
class RouteFunnel:
    """One row's funnel, with the skip reasons."""

    funnel: Funnel
    skip_reasons: Counter[str] = field(default_factory=Counter)
    proven_by_source: Counter[str] = field(default_factory=Counter)

    def add(self, request: CoachingRequest) -> None:
        """Count one request at every step its history reached.

        The counts are `gencoach.funnel`'s: a request proven later still counts as executed
        and corrected, so `gencoach status` and `/metrics` give the same numbers.
        """
        reached = {step.state for step in request.history} | {request.state}
        refused = request.state == "skipped" and refused_by_limits(request.reason)
        for state in reached:
            self.funnel.arrived(state, refused=refused)
        if request.state == "skipped" and not refused:
            self.skip_reasons[request.reason or "no reason recorded"] += 1
        if request.state == "proven":
            source = request.proposals[0].decision_source if request.proposals else "unknown"
            self.proven_by_source[source] += 1

    def to_json(self) -> dict[str, object]:
        """The counts, the skip reasons (most frequent first) and each step's rate."""
        return {
            "route": self.funnel.row,
            **{name: int(value) for name, value in self.funnel.counts().items()},
            "skipped_by_reason": [
                {"reason": reason, "count": count}
                for reason, count in self.skip_reasons.most_common()
            ],
            "proven_by_source": dict(sorted(self.proven_by_source.items())),
            "rates": self.funnel.rates(),
        }


def route_funnels(requests: Iterable[CoachingRequest]) -> list[dict[str, object]]:
    """Every route's funnel (all six, even unseen ones), then people's interventions, in a
    row of their own."""
    rows = {row: RouteFunnel(Funnel(row)) for row in ROWS}
    for request in requests:
        rows[funnel_row(request.route, request.human)].add(request)
    return [row.to_json() for row in rows.values()]


@dataclass
class JobStats:
    """Calls made by one kind of job, how many failed, and how long they took."""

    calls: int = 0
    errors: int = 0
    durations_s: list[float] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        """Counts and latency quantiles in seconds (None before a call finished)."""
        p50, p90 = _quantiles(self.durations_s)
        return {
            "calls": self.calls,
            "errors": self.errors,
            "latency_p50_s": p50,
            "latency_p90_s": p90,
        }


def _quantiles(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    if len(values) == 1:
        return round(values[0], 3), round(values[0], 3)
    cuts = quantiles(values, n=10, method="inclusive")
    return round(cuts[4], 3), round(cuts[8], 3)


def job_stats(requests: Iterable[CoachingRequest]) -> dict[str, JobStats]:
    """Statistics of LLM jobs (`llm`: diagnosis, rewrite) and of agent repairs (`agent`:
    `POST /v1/coaching`), from the requests' job records (`CoachingRequest.jobs`, one per
    job result, with the time its worker measured)."""
    stats = {"llm": JobStats(), "agent": JobStats()}
    for request in requests:
        for record in request.jobs:
            kind = stats[JOB_CALLS[record.job]]
            kind.calls += 1
            if record.status in FAILED_JOBS:
                kind.errors += 1
            if record.duration_s is not None:
                kind.durations_s.append(record.duration_s)
    return stats
