"""Crash points: a process killed at a named point of its work, for crash tests.

`GC_CRASH_AT` names one point, such as `request:failure:diagnosing` (a coaching request of
that route just stored in that state; not a `GENCOACH_` variable, as those are settings).
The process that reaches it writes one line to standard error and SIGKILLs itself
there, as a power cut would: nothing after the point runs, nothing is flushed or
released. The crash tests use it to kill a controller at every state a request can be
stored in, then restart it and check that nothing was lost. With `GC_CRASH_ONCE` naming a
file, only the first process to reach the point dies there (it creates the file): a
worker pool's replacement process carries on. Unset, as it always is in service, a point
costs one comparison.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Final

ENV: Final = "GC_CRASH_AT"
ONCE_ENV: Final = "GC_CRASH_ONCE"
_AT: Final = os.environ.get(ENV)
_ONCE: Final = os.environ.get(ONCE_ENV)


def crash_point(name: str) -> None:
    """Kill this process here if `GC_CRASH_AT` names `name`."""
    if _AT is not None and name == _AT and _first():
        sys.stderr.write(f"crash point {name}: killing process {os.getpid()}\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def _first() -> bool:
    """Whether this process is the first to reach the point (always, without `GC_CRASH_ONCE`)."""
    if _ONCE is None:
        return True
    try:
        os.close(os.open(_ONCE, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True
