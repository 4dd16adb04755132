"""The coaching funnel, read from the request records the controller keeps in Redis.

Per route: seen → skipped (by reason) → refused by limits → admitted → corrected →
executed → proven. A request counts at a step when its history reached that state, so
a request proven later still counts as executed and corrected. People's interventions
are counted in a row of their own: they skip the limits.

Job statistics come from the same histories: how long each request spent in a job's
state (queue wait included) and how many ended in error or abandoned there.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from statistics import quantiles

from gencoach.service.requests import CoachingRequest

ROUTES = ("format", "failure", "no_action", "exceeded", "suboptimal", "text_rewrite")
HUMAN_ROW = "human"
REFUSED_PREFIX = "refused by the stage limits"
# A job's state, and which worker calls it makes: LLM diagnosis/rewrite, agent repair.
LLM_STATES = frozenset({"diagnosing", "rewriting"})
AGENT_STATES = frozenset({"repairing"})
FAILED_ENDS = frozenset({"error", "abandoned"})


@dataclass
class RouteFunnel:
    """One route's counts, from opportunities seen to branches proven."""

    route: str
    seen: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    refused: int = 0
    admitted: int = 0
    corrected: int = 0
    executed: int = 0
    proven: int = 0
    in_flight: int = 0

    def add(self, request: CoachingRequest) -> None:
        """Count one request at every step its history reached."""
        reached = {step.state for step in request.history} | {request.state}
        self.seen += 1
        if request.state == "skipped":
            reason = request.reason or "no reason recorded"
            if reason.startswith(REFUSED_PREFIX):
                self.refused += 1
            else:
                self.skipped[reason] += 1
            return
        if request.human or "admitted" in reached:
            self.admitted += 1
        if "corrected" in reached:
            self.corrected += 1
        if "executed" in reached:
            self.executed += 1
        if request.state == "proven":
            self.proven += 1
        if request.state in ("admitted", "diagnosing", "repairing", "rewriting"):
            self.in_flight += 1

    def to_json(self) -> dict[str, object]:
        """The counts, the skip reasons (most frequent first) and each step's rate."""
        return {
            "route": self.route,
            "seen": self.seen,
            "skipped": sum(self.skipped.values()),
            "skipped_by_reason": [
                {"reason": reason, "count": count} for reason, count in self.skipped.most_common()
            ],
            "refused": self.refused,
            "admitted": self.admitted,
            "corrected": self.corrected,
            "executed": self.executed,
            "proven": self.proven,
            "in_flight": self.in_flight,
            "rates": {
                "admitted": _rate(self.admitted, self.seen),
                "corrected": _rate(self.corrected, self.admitted),
                "executed": _rate(self.executed, self.corrected),
                "proven": _rate(self.proven, self.executed),
            },
        }


def _rate(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def route_funnels(requests: Iterable[CoachingRequest]) -> list[dict[str, object]]:
    """Every route's funnel (all six, even unseen ones), then people's interventions."""
    rows = {route: RouteFunnel(route) for route in (*ROUTES, HUMAN_ROW)}
    for request in requests:
        rows[HUMAN_ROW if request.human else request.route].add(request)
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
    """Statistics of LLM jobs (`llm`) and of the agent's coaching route (`agent`)."""
    stats = {"llm": JobStats(), "agent": JobStats()}
    for request in requests:
        history = request.history
        for index, step in enumerate(history):
            kind = (
                "llm"
                if step.state in LLM_STATES
                else "agent"
                if step.state in AGENT_STATES
                else None
            )
            if kind is None or request.human:
                continue
            stats[kind].calls += 1
            if index + 1 < len(history):
                following = history[index + 1]
                stats[kind].durations_s.append(max(0.0, following.at - step.at))
                if following.state in FAILED_ENDS:
                    stats[kind].errors += 1
    return stats
