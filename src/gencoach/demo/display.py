"""How the demo shows its progress and its summary, on a terminal and in a pipe or a file.

On an interactive terminal the table is redrawn in place while the demo runs and erased
when it ends, so the summary table that follows is the only one left on the screen.
Elsewhere a line is printed every few seconds and lines run as wide as they need, where
rich would lay them out for 80 columns, cutting what is wider.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
from rich.console import Console
from rich.live import Live

from gencoach.demo.progress import Snapshot, render
from gencoach.demo.quality import summary_lines

LIVE_TITLE = "gencoach demo: coaching live"
REFRESH_S = 1.0
LINE_EVERY_S = 5.0


async def watch(
    read: Callable[[], Snapshot],
    console: Console,
    done: anyio.Event,
    refresh_s: float = REFRESH_S,
    line_every_s: float = LINE_EVERY_S,
) -> None:
    """Show what `read` (called in a thread) returns until `done` is set: a live table on
    an interactive terminal, gone once done, else a line every `line_every_s`."""
    if console.is_interactive:
        with Live(console=console, auto_refresh=False, transient=True) as live:
            while not done.is_set():
                seen = await anyio.to_thread.run_sync(read)
                live.update(render(seen, LIVE_TITLE), refresh=True)
                with anyio.move_on_after(refresh_s):
                    await done.wait()
        return
    next_line = time.monotonic()
    while not done.is_set():
        if time.monotonic() >= next_line:
            next_line = time.monotonic() + line_every_s
            console.print(progress_line(await anyio.to_thread.run_sync(read)))
        with anyio.move_on_after(refresh_s):
            await done.wait()


def progress_line(seen: Snapshot) -> str:
    """One line of progress, for output that is not an interactive terminal."""
    proven = sum(seen.reached["proven"].values())
    return (
        f"runs {seen.finished}/{seen.runs}, decisions {seen.decisions}, "
        f"requests {sum(seen.opportunities.values())}, proven {proven}"
    )


def print_summary(console: Console, seen: Snapshot, duration_s: float) -> None:
    """The final table, titled with the demo's duration, then proven corrections by
    decision source and the diagnoses' accuracy where the truth is known."""
    console.print(render(seen, f"gencoach demo: done in {duration_s:.0f} s"))
    for line in summary_lines(seen.quality):
        console.print(line, soft_wrap=True, highlight=False)
