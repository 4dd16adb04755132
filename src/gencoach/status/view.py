"""The snapshot as rich tables: runs and intake, the funnel per route, queues, backends."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from gencoach.funnel import COUNTS
from gencoach.status.snapshot import Snapshot

JOB_OUTCOMES = ("done", "declined", "abandoned", "error", "refused")


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


class _Section:
    """A bold title line over a borderless table whose first column is left-aligned."""

    def __init__(self, title: str, *columns: str) -> None:
        self.title = Text(title, style="bold")
        self.table = Table(box=None, pad_edge=False)
        for index, column in enumerate(columns):
            self.table.add_column(column, justify="left" if index == 0 else "right", no_wrap=True)

    def add_row(self, *cells: str) -> None:
        self.table.add_row(*cells)

    def renderable(self) -> RenderableType:
        return Group(self.title, self.table)


def _overview(snap: Snapshot, url: str) -> Text:
    # Counts the runs index keeps (the controller lists no run to print them).
    states = ", ".join(f"{_n(count)} {state}" for state, count in snap.runs.items())
    runs = f"{_n(sum(snap.runs.values()))} in all: {states}" if states else "none"
    events = snap.events
    unhandled = sum(snap.unhandled.values())
    lines = [
        f"controller  {url}   loop lag {_seconds(snap.loop_lag_s)}",
        f"runs        {runs}",
        f"events      {_n(events.get('applied', 0))} applied, "
        f"{_n(events.get('duplicate', 0))} duplicate, "
        f"{_n(events.get('dead_lettered', 0))} dead-lettered ({_n(snap.dead_letters)} kept)",
        f"streams     {_n(unhandled)} entries not yet handled by the controllers",
    ]
    return Text("\n".join(lines))


def _funnel(snap: Snapshot) -> RenderableType:
    if not snap.funnels:
        return Text("coaching    no opportunity yet", style="dim")
    routes = sorted(snap.funnels)
    section = _Section("coaching funnel (requests per route)", "", *routes)
    for count in COUNTS:
        section.add_row(count, *(_n(getattr(snap.funnels[route], count)) for route in routes))
    return section.renderable()


def _skips(snap: Snapshot) -> RenderableType | None:
    if not snap.skips:
        return None
    section = _Section("why opportunities were skipped", "route", "reason", "count")
    section.table.columns[1].justify = "left"
    for (route, reason), count in sorted(snap.skips.items(), key=lambda item: -item[1]):
        section.add_row(route, reason, _n(count))
    return section.renderable()


def _jobs(snap: Snapshot) -> RenderableType | None:
    if not snap.jobs:
        return None
    section = _Section("worker jobs", "kind", *JOB_OUTCOMES)
    for kind, outcomes in sorted(snap.jobs.items()):
        section.add_row(kind, *(_n(outcomes.get(outcome, 0)) for outcome in JOB_OUTCOMES))
    return section.renderable()


def _queues(snap: Snapshot) -> RenderableType:
    section = _Section("queues", "queue", "waiting", "oldest", "workers")
    for name, queue in sorted(snap.queues.items()):
        oldest = _seconds(queue.oldest_s) if queue.waiting else "-"
        section.add_row(name, _n(queue.waiting), oldest, _n(queue.workers))
    return section.renderable()


def _backends(snap: Snapshot) -> RenderableType | None:
    if not snap.backends:
        return None
    columns = ("backend", "calls", "failed", "mean", "tokens in", "tokens out", "refused")
    section = _Section("backends (mean: latency of the calls answered; refused: answers)", *columns)
    for name, calls in sorted(snap.backends.items()):
        section.add_row(
            name,
            _n(calls.ok + calls.failed),
            _n(calls.failed),
            _seconds(calls.mean_s),
            _n(calls.prompt_tokens),
            _n(calls.completion_tokens),
            _n(calls.refused_answers),
        )
    return section.renderable()


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
