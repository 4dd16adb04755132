"""A progress bar over the saves, on a terminal only, with messages printed above it."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from rich.console import Console
from rich.progress import Progress

T = TypeVar("T")


@dataclass
class Display:
    """Where one-line messages go and how the saves are tracked."""

    progress: Progress | None = None

    def say(self, message: str) -> None:
        """Print a message on stderr (above the bar when there is one)."""
        if self.progress is None:
            print(message, file=sys.stderr)
        else:
            self.progress.console.print(message, markup=False, highlight=False, soft_wrap=True)

    def track(self, items: Iterable[T], total: int) -> Iterable[T]:
        """The items, advancing the bar as each is taken."""
        if self.progress is None:
            return items
        return self.progress.track(items, total=total, description="exporting saves")


@contextmanager
def display(wanted: bool) -> Iterator[Display]:
    """A bar when `wanted` and stderr is a terminal; plain messages otherwise."""
    if not (wanted and sys.stderr.isatty()):
        yield Display()
        return
    with Progress(console=Console(stderr=True), transient=True) as progress:
        yield Display(progress)
