"""The snapshot as rich tables: runs and intake, the funnel per route, queues, backends."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gencoach.status.snapshot import Snapshot

FUNNEL = (
    "opportunities",
    "skipped",
    "refused",
    "admitted",
    "corrected",
    "reinjected",
    "proven",
    "unproven",
    "failed",
)
JOB_OUTCOMES = ("done", "declined", "abandoned", "error", "refused")


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def _table(title: str, *columns: str) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", box=None, pad_edge=False)
    for index, column in enumerate(columns):
        table.add_column(column, justify="left" if index == 0 else "right", no_wrap=True)
    return table


def _overview(snap: Snapshot, url: str) -> Text:
    runs = ", ".join(f"{_n(count)} {state}" for state, count in snap.runs.items()) or "none"
    events = snap.events
    unhandled = sum(snap.unhandled.values())
    lines = [
        f"controller  {url}   loop lag {_seconds(snap.loop_lag_s)}",
        f"runs        {runs}",
        f"events      {_n(events.get('applied', 0))} applied, "
        f"{_n(events.get('duplicate', 0))} duplicate, "
        f"{_n(events.get('dead_lettered', 0))} dead-lettered "
        f"({_n(snap.dead_letters)} kept); {_n(unhandled)} stream entries not yet handled",
    ]
    return Text("\n".join(lines))


def _funnel(snap: Snapshot) -> RenderableType:
    if not snap.funnels:
        return Text("coaching    no opportunity yet", style="dim")
    table = _table("coaching funnel (requests per route)", "route", *FUNNEL)
    for route, funnel in sorted(snap.funnels.items()):
        table.add_row(route, *(_n(getattr(funnel, column)) for column in FUNNEL))
    return table


def _skips(snap: Snapshot) -> RenderableType | None:
    if not snap.skips:
        return None
    table = _table("why opportunities were skipped", "route", "reason", "count")
    table.columns[1].justify = "left"
    for (route, reason), count in sorted(snap.skips.items(), key=lambda item: -item[1]):
        table.add_row(route, reason, _n(count))
    return table


def _jobs(snap: Snapshot) -> RenderableType | None:
    if not snap.jobs:
        return None
    table = _table("worker jobs", "kind", *JOB_OUTCOMES)
    for kind, outcomes in sorted(snap.jobs.items()):
        table.add_row(kind, *(_n(outcomes.get(outcome, 0)) for outcome in JOB_OUTCOMES))
    return table


def _queues(snap: Snapshot) -> RenderableType:
    table = _table("queues", "queue", "waiting", "oldest", "workers")
    for name, queue in sorted(snap.queues.items()):
        oldest = _seconds(queue.oldest_s) if queue.waiting else "-"
        table.add_row(name, _n(queue.waiting), oldest, _n(queue.workers))
    return table


def _backends(snap: Snapshot) -> RenderableType | None:
    if not snap.backends:
        return None
    columns = ("backend", "calls", "failed", "mean latency", "prompt tok", "completion tok")
    table = _table("backends", *columns, "answers refused")
    for name, calls in sorted(snap.backends.items()):
        table.add_row(
            name,
            _n(calls.ok + calls.failed),
            _n(calls.failed),
            _seconds(calls.mean_s),
            _n(calls.prompt_tokens),
            _n(calls.completion_tokens),
            _n(calls.refused_answers),
        )
    return table


def render(snap: Snapshot, url: str) -> Group:
    """Everything `gencoach status` prints, top to bottom."""
    parts = [
        _overview(snap, url),
        _funnel(snap),
        _skips(snap),
        _jobs(snap),
        _queues(snap),
        _backends(snap),
    ]
    spaced: list[RenderableType] = []
    for part in parts:
        if part is not None:
            spaced.extend([part, Text("")])
    return Group(*spaced[:-1])
