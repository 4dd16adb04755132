"""The demo's Ctrl-C is never lost: a SIGINT whose KeyboardInterrupt was dropped (raised
inside a `__del__`) is still seen, and one that arrives in the event loop cancels it."""

from __future__ import annotations

import gc
import os
import signal

import anyio
import pytest

from gencoach.demo.interrupts import Interrupts


class _Collected:
    """An object whose `__del__` receives the SIGINT, as a connection pool's did."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)


# Python reports the dropped KeyboardInterrupt as unraisable: that is the case under test.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_an_interrupt_dropped_in_a_finaliser_is_still_seen() -> None:
    interrupts = Interrupts()
    with interrupts.installed():
        _Collected()  # its __del__ raises KeyboardInterrupt, which Python drops
        gc.collect()
    with pytest.raises(KeyboardInterrupt):
        interrupts.check()


def test_an_interrupt_in_the_event_loop_cancels_it_without_raising() -> None:
    interrupts = Interrupts()
    reached: list[str] = []

    async def main() -> None:
        with anyio.fail_after(30):
            await cancelled_by_sigint()

    async def cancelled_by_sigint() -> None:
        async with anyio.create_task_group() as outer:
            outer.start_soon(interrupts.cancel_on_sigint, outer.cancel_scope)
            await anyio.sleep(0.1)  # the receiver is in place before the signal
            os.kill(os.getpid(), signal.SIGINT)
            await anyio.sleep(60)
            reached.append("not cancelled")
        reached.append("cancelled")

    with interrupts.installed():
        anyio.run(main)
    assert reached == ["cancelled"]
    assert interrupts.seen.is_set()
    with pytest.raises(KeyboardInterrupt):
        interrupts.check()
