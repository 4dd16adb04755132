"""The coaching funnel as `/metrics`, `gencoach status` and the console each show it, and
the check that the three agree and add up (`gencoach.funnel` defines every count)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from gencoach.funnel import COUNTS, ROWS
from tests.support.metrics import Samples, scrape

Funnel = dict[str, dict[str, float]]
GENCOACH = Path(sys.executable).parent / "gencoach"


def metrics_funnel(samples: Samples) -> Funnel:
    """The funnel per row, read straight from the counters `/metrics` serves."""
    rows = {}
    for row in ROWS:
        arrived = samples.by("gencoach_requests_total", "state", route=row)
        refused = samples.total("gencoach_opportunities_total", route=row, outcome="refused")
        failed = sum(arrived.get(state, 0) for state in ("declined", "abandoned", "error"))
        counts = {
            "seen": arrived.get("opportunity", 0),
            "skipped": arrived.get("skipped", 0) - refused,
            "refused": refused,
            **{s: arrived.get(s, 0) for s in ("admitted", "corrected", "reinjected", "executed")},
            "proven": arrived.get("proven", 0),
            "unproven": arrived.get("unproven", 0),
            "failed": failed,
        }
        counts["open"] = counts["admitted"] - failed - counts["proven"] - counts["unproven"]
        rows[row] = counts
    return rows


def status_funnel(url: str) -> Funnel:
    """The funnel table `gencoach status` prints, per row (the routes it lists)."""
    done = subprocess.run(
        [str(GENCOACH), "status", "--url", url],
        capture_output=True, text=True, timeout=60, check=True,
        env={"PATH": f"{GENCOACH.parent}:/usr/bin:/bin", "COLUMNS": "200"},
    )  # fmt: skip
    lines = done.stdout.splitlines()
    title = next(i for i, line in enumerate(lines) if line.startswith("coaching funnel"))
    routes = lines[title + 1].split()
    table: Funnel = {route: {} for route in routes}
    for line in lines[title + 2 : title + 2 + len(COUNTS)]:
        name, *values = line.split()
        for route, value in zip(routes, values, strict=True):
            table[route][name] = float(value.replace(",", ""))
    return table


def console_funnel(url: str) -> tuple[Funnel, dict[str, Any]]:
    """The console's funnel rows, and its whole answer (agent and backend rows)."""
    payload = httpx.get(f"{url}/console/api/funnel", timeout=10).json()
    rows = {row["route"]: {name: float(row[name]) for name in COUNTS} for row in payload["routes"]}
    return rows, payload


def assert_funnel_adds_up(url: str, samples: Samples | None = None) -> Funnel:
    """Every row adds up, and `/metrics`, the console and `gencoach status` show the same
    numbers (status lists the rows that saw something). Returns the funnel."""
    samples = samples or scrape(url)
    from_metrics = metrics_funnel(samples)
    from_console, _ = console_funnel(url)
    from_status = status_funnel(url)
    for row, counts in from_metrics.items():
        seen, admitted = counts["seen"], counts["admitted"]
        assert seen == counts["skipped"] + counts["refused"] + admitted, (row, counts)
        ended = counts["failed"] + counts["proven"] + counts["unproven"]
        assert admitted == counts["open"] + ended, (row, counts)
        assert counts["open"] >= 0, (row, counts)
        chain = [counts[name] for name in ("admitted", "corrected", "reinjected", "executed")]
        assert chain == sorted(chain, reverse=True), (row, counts)
        assert counts["executed"] >= counts["proven"] + counts["unproven"], (row, counts)
        assert from_console[row] == counts, (row, from_console[row], counts)
        if seen:
            assert from_status[row] == counts, (row, from_status[row], counts)
    return from_metrics
