"""Ctrl-C for the demo, never lost.

`Interrupts` notes every SIGINT while the parts start (`installed`), and lets the event
loop's part see one that was dropped (`check`) or that arrives while it runs
(`cancel_on_sigint`).
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

import anyio


class Interrupts:
    """The SIGINTs the demo received.

    Python raises KeyboardInterrupt wherever the main thread happens to be when SIGINT
    arrives; raised inside a `__del__` (a connection pool being collected, say) it is
    printed as "Exception ignored" and dropped, and the demo would go on to its end. So
    every SIGINT is also noted, for `check` to raise it again.
    """

    def __init__(self) -> None:
        self.seen = threading.Event()

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Note each SIGINT (and raise KeyboardInterrupt) while the block runs."""

        def on_sigint(signum: int, frame: FrameType | None) -> None:
            self.seen.set()
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGINT, on_sigint)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, previous)

    def check(self) -> None:
        """Raise KeyboardInterrupt if a SIGINT came, even one whose raise was dropped."""
        if self.seen.is_set():
            raise KeyboardInterrupt

    async def cancel_on_sigint(self, scope: anyio.CancelScope) -> None:
        """Cancel `scope` at the first SIGINT (or at once if one came already), through
        anyio's signal receiver, which raises nothing."""
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            if not self.seen.is_set():
                async for _ in signals:
                    self.seen.set()
                    break
        scope.cancel()
