"""Coaching quality, per route, from the requests the controller lists.

`quality_of` builds a `Quality` table (a `RouteQuality` per route, and their total) from
`GET /v1/runs/{id}/requests`; `table_rows` and `summary_lines` print it. See
docs/coaching.md ("Diagnosis accuracy").
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gencoach.protocol import MODEL_SOURCES

BLAMES = ("right", "wrong", "declined", "none")
NOT_ADMITTED = frozenset({"opportunity", "skipped"})


def maker(source: str | None) -> str:
    """Who made a correction's decision: `model`, `fallback` or `other`."""
    if source in MODEL_SOURCES:
        return "model"
    return "fallback" if source == "fallback" else "other"


@dataclass
class RouteQuality:
    """One route's counts (or every route's, summed).

    "Proven" says the coached branch reached stage success, not that the coach was right
    or even made the correction; these counts say both. Where the generator knows the
    truly faulty decision, `blame` counts how diagnoses compared with it (`judged_by_rule`:
    those the single-step rule made, with no model call); `corrected_by` counts who made
    each admitted request's correction (`maker`); `tokens` and `seconds_to_correction`
    are the cost. The tokens are those of gencoach's own backends: an agent's repair model
    is asked on the agent's session backend, whose tokens the agent does not report.
    """

    admitted: int = 0
    proven: int = 0
    blame: Counter[str] = field(default_factory=Counter)
    judged_by_rule: int = 0
    corrected_by: Counter[str] = field(default_factory=Counter)
    proven_by_source: Counter[str] = field(default_factory=Counter)
    tokens: int = 0
    seconds_to_correction: list[float] = field(default_factory=list)

    def add(self, request: Mapping[str, Any]) -> None:
        """Count one request as the API lists it."""
        if request.get("blame") is not None:
            self.blame[request["blame"]] += 1
            diagnosis = request.get("diagnosis") or {}
            self.judged_by_rule += diagnosis.get("rule") == "single_step"
        self.tokens += int(request.get("tokens") or 0)
        if request["state"] in NOT_ADMITTED:
            return
        self.admitted += 1
        source = request.get("decision_source")
        corrected = _entered(request, "corrected")
        if corrected is not None:
            self.corrected_by[maker(source)] += 1
        if request["state"] == "proven":
            self.proven += 1
            self.proven_by_source[source or "unknown"] += 1
            if corrected is not None:
                self.seconds_to_correction.append(corrected)

    def merge(self, other: RouteQuality) -> None:
        """Add another count of the same route (another run) to this one."""
        self.admitted += other.admitted
        self.proven += other.proven
        self.blame.update(other.blame)
        self.judged_by_rule += other.judged_by_rule
        self.corrected_by.update(other.corrected_by)
        self.proven_by_source.update(other.proven_by_source)
        self.tokens += other.tokens
        self.seconds_to_correction.extend(other.seconds_to_correction)

    @property
    def judged(self) -> int:
        """Requests whose diagnosis could be compared with the truth."""
        return sum(self.blame.values())

    def proven_rate(self) -> float | None:
        """Proven requests per admitted one."""
        return self.proven / self.admitted if self.admitted else None

    def tokens_per_proven(self) -> float | None:
        """Tokens spent on the route per proven correction."""
        return self.tokens / self.proven if self.proven else None

    def median_seconds(self) -> float | None:
        """Median seconds from a proven request's opening to its correction."""
        return statistics.median(self.seconds_to_correction) if self.seconds_to_correction else None


def _entered(request: Mapping[str, Any], state: str) -> float | None:
    for step in request.get("history") or []:
        if step["state"] == state:
            return float(step["after_s"])
    return None


@dataclass
class Quality:
    """Every route's quality, and all routes together."""

    routes: dict[str, RouteQuality] = field(default_factory=dict)
    total: RouteQuality = field(default_factory=RouteQuality)

    def add(self, request: Mapping[str, Any]) -> None:
        """Count one request in its route and in the total."""
        self.routes.setdefault(request["route"], RouteQuality()).add(request)
        self.total.add(request)

    def merge(self, other: Quality) -> None:
        """Add another table (another run) to this one."""
        for route, counts in other.routes.items():
            self.routes.setdefault(route, RouteQuality()).merge(counts)
        self.total.merge(other.total)


def quality_of(requests: Iterable[Mapping[str, Any]]) -> Quality:
    """The quality table of these requests."""
    quality = Quality()
    for request in requests:
        quality.add(request)
    return quality


def _share(count: int, of: int) -> str:
    return f"{count}/{of}" if of else "-"


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


COLUMNS = (
    "route",
    "judged",
    "by rule",
    "right",
    "wrong",
    "declined",
    "no diagnosis",
    "admitted",
    "proven",
    "made by model",
    "made by fallback",
    "made otherwise",
    "proven by source",
    "s to correction",
    "gencoach tokens/proven",
)
"""The table's columns; tokens are those of gencoach's own backends (see the module)."""


def by_source(counts: Mapping[str, int]) -> str:
    """Counts by decision source in one phrase, `expected_decision 3, fallback 1`."""
    return ", ".join(f"{source} {n}" for source, n in sorted(counts.items()) if n)


def table_rows(quality: Quality) -> list[tuple[str, ...]]:
    """The table's rows, one per route that had requests, then `all`."""
    named = [*sorted(quality.routes.items()), ("all", quality.total)]
    rows = []
    for route, counts in named:
        rate = counts.proven_rate()
        proven = f"{counts.proven} ({rate:.0%})" if rate is not None else str(counts.proven)
        rows.append(
            (
                route,
                str(counts.judged),
                str(counts.judged_by_rule),
                *(_share(counts.blame[blame], counts.judged) for blame in BLAMES),
                str(counts.admitted),
                proven,
                *(str(counts.corrected_by[who]) for who in ("model", "fallback", "other")),
                by_source(counts.proven_by_source) or "-",
                _number(counts.median_seconds()),
                _number(counts.tokens_per_proven(), 0),
            )
        )
    return rows


def summary_lines(quality: Quality) -> list[str]:
    """What the demo prints under its table: proven corrections by decision source and,
    where the truth is known, the diagnoses' accuracy."""
    total = quality.total
    lines = [
        f"proven corrections by decision source: {by_source(total.proven_by_source) or 'none'}"
    ]
    if total.judged:
        blame = total.blame
        lines.append(
            f"diagnoses against the simulator's truth: {blame['right']} of {total.judged} "
            f"blamed the faulty decision, {blame['wrong']} another, {blame['declined']} "
            f"declined, {blame['none']} gave no diagnosis ({total.judged_by_rule} made by "
            "the single-step rule)"
        )
    return lines
