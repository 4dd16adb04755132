"""What the demo prints: its summary table once and whole, on a terminal and in a pipe."""

from __future__ import annotations

import io

import anyio
import anyio.from_thread
import pytest
from rich.console import Console

from gencoach.demo.display import (
    LIVE_TITLE,
    print_summary,
    progress_line,
    watch,
)
from gencoach.demo.progress import REACHED, ROUTES, Snapshot, footer
from gencoach.runtime.terminal import WIDTH_WHEN_NOT_A_TERMINAL, fit_to_output
from tests.demo.screen import screen

SUMMARY_TITLE = "gencoach demo: done in 23 s"
COLUMNS = ("route", "seen", "limited", "skipped", "admitted", "corrected", "executed", "proven")


def _snapshot(step: int) -> Snapshot:
    """Four runs under way, every route seen (the table is then wider than 80 columns)."""
    seen = Snapshot(runs=4, finished=min(step, 4), situations=40 * step, decisions=100 * step)
    for index, route in enumerate(ROUTES):
        seen.opportunities[route] = (index + 3) * step
        seen.skipped_by_limits[route] = step
        for stage in REACHED:
            seen.reached[stage][route] = step
    return seen


SNAPSHOTS = [_snapshot(step) for step in (1, 2, 3)]


def _show(console: Console, buffer: io.StringIO) -> str:
    """Watch SNAPSHOTS to the last, then print the summary, as the demo does; returns what
    was written up to the moment the last snapshot is read (the live display still up)."""
    written_while_live = []

    async def main() -> None:
        done = anyio.Event()
        reads = iter(SNAPSHOTS)

        def read() -> Snapshot:
            seen = next(reads)
            if seen is SNAPSHOTS[-1]:
                written_while_live.append(buffer.getvalue())
                anyio.from_thread.run_sync(done.set)
            return seen

        with anyio.move_on_after(10) as scope:
            await watch(read, console, done, refresh_s=0.01, line_every_s=0)
        if scope.cancelled_caught:
            pytest.fail("the progress display did not stop within 10 s of the demo's end")

    anyio.run(main)
    print_summary(console, SNAPSHOTS[-1], 23)
    return written_while_live[0]


QUALITY_LINE = "proven corrections by decision source: "


def _footer_under(lines: list[str], title: str) -> str:
    """The footer under the table titled `title` (the output's last lines), unwrapped."""
    top = next(i for i, line in enumerate(lines) if title in line)
    first = next(i for i in range(top, len(lines)) if lines[i].startswith("runs "))
    last = next(
        (i for i in range(first, len(lines)) if lines[i].startswith(QUALITY_LINE)), len(lines)
    )
    return " ".join(line.strip() for line in lines[first:last])


def test_a_terminal_keeps_only_the_summary_table_and_shows_the_live_footer_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On an 80-column terminal the live table fits, its footer wrapped whole under it, while
    the demo runs; it is erased at the end, so the summary table is the one table left."""
    monkeypatch.setenv("TERM", "xterm-256color")
    buffer = io.StringIO()
    console = Console(  # soft_wrap: as the CLI's
        file=buffer,
        soft_wrap=True,
        force_terminal=True,
        force_interactive=True,
        width=80,
        height=40,
    )
    fit_to_output(console)
    assert console.width == 80

    live = screen(_show(console, buffer))
    assert sum(LIVE_TITLE in line for line in live) == 1, "\n".join(live)
    assert _footer_under(live, LIVE_TITLE) == footer(SNAPSHOTS[-2]), "\n".join(live)
    assert all(len(line) <= 80 for line in live), "\n".join(live)
    assert "…" not in "\n".join(live)

    final = screen(buffer.getvalue())
    assert not any(LIVE_TITLE in line for line in final), "\n".join(final)
    assert sum(SUMMARY_TITLE in line for line in final) == 1, "\n".join(final)
    assert _footer_under(final, SUMMARY_TITLE) == footer(SNAPSHOTS[-1]), "\n".join(final)


def test_piped_output_has_one_summary_table_with_whole_headers_and_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not a terminal (`gencoach demo | cat`, `make demo > file`): a progress line per
    reading, then the summary table once, nothing cut, its footer one line of its own
    however wide (rich would lay it out for 80 columns)."""
    monkeypatch.delenv("COLUMNS", raising=False)
    buffer = io.StringIO()
    console = Console(file=buffer, soft_wrap=True)  # soft_wrap: as the CLI's
    assert not console.is_terminal
    fit_to_output(console)
    assert console.width == WIDTH_WHEN_NOT_A_TERMINAL

    _show(console, buffer)
    output = buffer.getvalue()
    lines = output.splitlines()
    assert "\x1b" not in output, output
    assert "…" not in output, output
    assert lines[: len(SNAPSHOTS)] == [progress_line(seen) for seen in SNAPSHOTS], output
    assert sum(SUMMARY_TITLE in line for line in lines) == 1, output
    assert LIVE_TITLE not in output
    (header,) = (line for line in lines if "route" in line)
    assert [word for word in header.split() if word.isalpha()] == list(COLUMNS), header
    rows = [line.split() for line in lines if line.split() and line.split()[0] in ROUTES]
    assert [row[0] for row in rows] == list(ROUTES), output
    assert all(len(row) == len(COLUMNS) for row in rows), output
    assert lines[-2] == footer(SNAPSHOTS[-1]), output
    assert len(lines[-2]) > 80
    assert lines[-1] == f"{QUALITY_LINE}none", "the summary ends with the proven by source"


def test_columns_sets_the_width_when_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """COLUMNS, when set, is the width of output that is not a terminal."""
    monkeypatch.setenv("COLUMNS", "100")
    console = Console(file=io.StringIO())
    fit_to_output(console)
    assert console.width == 100
