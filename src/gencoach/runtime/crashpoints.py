"""Crash points: a process killed at a named point of its work, for crash tests.

`crash_point(name)` kills the process there when `GC_CRASH_AT` names the point (its
docstring says how, and what `GC_CRASH_ONCE` changes); unset, a point costs one comparison.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Final

# Not `GENCOACH_` variables: those are settings, and these are never set in service.
ENV: Final = "GC_CRASH_AT"
ONCE_ENV: Final = "GC_CRASH_ONCE"
_AT: Final = os.environ.get(ENV)
_ONCE: Final = os.environ.get(ONCE_ENV)


def crash_point(name: str) -> None:
    """Kill this process here if `GC_CRASH_AT` names `name`.

    A point is named such as `request:failure:diagnosing` (a coaching request of that
    route just stored in that state). The process that reaches it writes one line to
    standard error and SIGKILLs itself there, as a power cut would: nothing after the
    point runs, nothing is flushed or released. The crash tests kill a controller at every
    state a request can be stored in this way, then restart it and check that nothing was
    lost. With `GC_CRASH_ONCE` naming a file, only the first process to reach the point
    dies there (it creates the file): a worker pool's replacement process carries on.
    """
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
