"""A progress bar, on a terminal only, with messages printed above it: over the saves of an
export, or the sources of a library build."""

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
    """Where one-line messages go and how the saves (or sources) are tracked."""

    progress: Progress | None = None
    description: str = "exporting saves"

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
        return self.progress.track(items, total=total, description=self.description)


@contextmanager
def display(wanted: bool, description: str = "exporting saves") -> Iterator[Display]:
    """A bar described by `description` when `wanted` and stderr is a terminal; plain
    messages otherwise."""
    if not (wanted and sys.stderr.isatty()):
        yield Display(description=description)
        return
    with Progress(console=Console(stderr=True), transient=True) as progress:
        yield Display(progress, description)
