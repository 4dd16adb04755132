"""Fetching a controller's `/metrics` and printing it, once or refreshed until Ctrl-C."""

from __future__ import annotations

import signal
import sys
import threading
import time

import httpx
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.text import Text

from gencoach.runtime.terminal import fitted_console
from gencoach.status.snapshot import Snapshot, parse
from gencoach.status.view import render

# How long one scrape may take (a watch's own interval, if shorter).
TIMEOUT_S = 5.0

# How much of an unexpected answer an error quotes.
_EXCERPT = 200


class StatusUnavailable(Exception):  # noqa: N818 - a state, reported in one line
    """The controller could not be read; the message says where and why."""


def fetch(url: str, timeout_s: float) -> Snapshot:
    """One scrape of `url`/metrics, parsed."""
    endpoint = f"{url}/metrics"
    try:
        response = httpx.get(endpoint, timeout=timeout_s)
    except httpx.HTTPError as error:
        raise StatusUnavailable(
            f"no controller answers at {endpoint} ({error or type(error).__name__}); "
            "is `gencoach serve` running with this config?"
        ) from None
    if response.status_code != httpx.codes.OK:
        excerpt = response.text[:_EXCERPT]
        raise StatusUnavailable(f"{endpoint} answered {response.status_code}: {excerpt}")
    try:
        return parse(response.text)
    except ValueError as error:
        raise StatusUnavailable(
            f"{endpoint} did not answer in Prometheus text ({error}); is it a gencoach controller?"
        ) from None


def view(url: str, timeout_s: float) -> RenderableType:
    """The status, or the one line that says why there is none."""
    try:
        return render(fetch(url, timeout_s), url)
    except StatusUnavailable as error:
        return Text(str(error), style="red")


def _frame(url: str, every_s: float, timeout_s: float) -> RenderableType:
    stamp = Text(f"{time.strftime('%H:%M:%S')}, every {every_s:g} s; Ctrl-C ends", style="dim")
    return Group(stamp, view(url, timeout_s))


def watch_status(console: Console, url: str, every_s: float, timeout_s: float) -> None:
    """Show the status every `every_s` until Ctrl-C (or SIGTERM): redrawn in place on a
    terminal, appended frame after frame to a pipe or a file. A lost controller is shown,
    not fatal.

    The signal only sets an event the loop waits on: a KeyboardInterrupt raised at any
    bytecode could leave the console's lock held (`with` is not atomic against it), and
    the exit would then wait on it for ever."""
    stop = threading.Event()
    previous = {
        signum: signal.signal(signum, lambda *_: stop.set())
        for signum in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        if not console.is_terminal:
            while not stop.is_set():
                console.print(_frame(url, every_s, timeout_s), "")
                console.file.flush()
                stop.wait(every_s)
            return
        with Live(_frame(url, every_s, timeout_s), console=console, auto_refresh=False) as live:
            while not stop.wait(every_s):
                live.update(_frame(url, every_s, timeout_s), refresh=True)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def show_status(url: str, *, watch: bool, every_s: float) -> int:
    """Print the status of the controller at `url` once (or `watch` it); the exit status."""
    console = fitted_console()
    if watch:
        watch_status(console, url, every_s, timeout_s=min(every_s, TIMEOUT_S))
        return 0
    try:
        snapshot = fetch(url, timeout_s=TIMEOUT_S)
    except StatusUnavailable as error:
        print(error, file=sys.stderr)
        return 1
    console.print(render(snapshot, url))
    return 0
