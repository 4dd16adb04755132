"""What the demo shows: runs, decisions and coaching requests, read from the controller."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import httpx
from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gencoach.demo.quality import Quality

ROUTES = ("format", "failure", "no_action", "exceeded", "suboptimal", "text_rewrite")
REACHED = {
    "admitted": {
        "queued",
        "diagnosing",
        "repairing",
        "rewriting",
        "declined",
        "corrected",
        "abandoned",
        "error",
        "reinjected",
        "executed",
        "proven",
        "unproven",
    },
    "corrected": {"corrected", "reinjected", "executed", "proven", "unproven"},
    "executed": {"executed", "proven", "unproven"},
    "proven": {"proven"},
}


@dataclass
class Snapshot:
    """Counts across every run, per coaching route."""

    runs: int = 0
    finished: int = 0
    situations: int = 0
    decisions: int = 0
    opportunities: Counter[str] = field(default_factory=Counter)
    skipped_by_limits: Counter[str] = field(default_factory=Counter)
    skipped_other: Counter[str] = field(default_factory=Counter)
    reached: dict[str, Counter[str]] = field(
        default_factory=lambda: {stage: Counter() for stage in REACHED}
    )
    quality: Quality = field(default_factory=Quality)

    def proven(self, route: str) -> int:
        """Proven requests of a route."""
        return self.reached["proven"][route]


def snapshot(api: str, client: httpx.Client) -> Snapshot:
    """Read every run's size and requests from the controller's API."""
    seen = Snapshot()
    # A demo's runs fit in one page.
    for run in client.get(f"{api}/v1/runs", params={"limit": 1000}).json()["runs"]:
        run_id = run["run_id"]
        seen.runs += 1
        seen.finished += run["state"] in ("finished", "saved")
        summary = client.get(f"{api}/v1/runs/{run_id}")
        if summary.status_code == httpx.codes.OK:
            seen.situations += summary.json()["situations"]
            seen.decisions += summary.json()["candidates"]
        requests = client.get(f"{api}/v1/runs/{run_id}/requests")
        if requests.status_code != httpx.codes.OK:
            continue
        for request in requests.json()["requests"]:
            route, state = request["route"], request["state"]
            seen.opportunities[route] += 1
            seen.quality.add(request)
            if state == "skipped":
                limits = (request["reason"] or "").startswith("refused by the stage limits")
                (seen.skipped_by_limits if limits else seen.skipped_other)[route] += 1
            for stage, states in REACHED.items():
                seen.reached[stage][route] += state in states
    return seen


def render(seen: Snapshot, title: str) -> RenderableType:
    """The table the demo shows, live and at the end, then its footer.

    Without outer edges the table fits 80 columns. The footer wraps at the console's width,
    never cut, even on a console that soft-wraps (as the demo's does, and Live then crops
    each line at the terminal's width).
    """
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("route")
    for column in ("seen", "limited", "skipped", "admitted", "corrected", "executed"):
        table.add_column(column, justify="right")
    table.add_column("proven", justify="right", style="bold green")
    for route in ROUTES:
        if seen.opportunities[route] == 0:
            continue
        table.add_row(
            route,
            str(seen.opportunities[route]),
            str(seen.skipped_by_limits[route]),
            str(seen.skipped_other[route]),
            *(str(seen.reached[stage][route]) for stage in REACHED),
        )
    return Group(table, Text(footer(seen), style="table.caption", no_wrap=False, overflow="fold"))


def footer(seen: Snapshot) -> str:
    """The line under the table: how far the runs are, and what its columns mean."""
    return (
        f"runs {seen.finished}/{seen.runs} finished · situations {seen.situations} · "
        f"decisions {seen.decisions} · seen: opportunities · limited: refused by the "
        "stage limits · skipped: ruled out by config, agent or trajectory"
    )
