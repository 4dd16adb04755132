"""Process helpers for tests that start, kill and look for processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import httpx

from gencoach.runtime.ports import free_port as free_port  # the suite's servers' ports

T = TypeVar("T")

STARTUP_S = float(os.environ.get("GC_TEST_STARTUP_S", "60"))
"""How long a test waits for a process it started to be ready: long enough for a machine
whose load average is tens of times its cores (GC_TEST_STARTUP_S changes it)."""


def log_tail(path: Path, chars: int = 4000) -> str:
    """The end of a process's output file, to quote when it failed to start."""
    if not path.exists():
        return f"(no output: {path} does not exist)"
    text = path.read_text(errors="replace")
    return text[-chars:] if text else f"(no output in {path})"


def wait_started(
    ready: Callable[[], T | None],
    process: subprocess.Popen[bytes] | subprocess.Popen[str],
    output: Path,
    what: str,
    timeout_s: float = STARTUP_S,
) -> T:
    """Poll `ready()` until it is truthy and return it; fail quoting the end of the process's
    `output` if the process exits first or `timeout_s` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = ready()
        if value:
            return value
        if process.poll() is not None:
            raise RuntimeError(
                f"{what} exited ({process.returncode}) before it was ready; the end of its "
                f"output:\n{log_tail(output)}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"{what} was not ready in {timeout_s} s; the end of its output:\n"
                + log_tail(output)
            )
        time.sleep(0.05)


def answers_200(url: str) -> bool:
    """Whether GET `url` answers 200 now."""
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    try:
        fields = stat.read_text().rsplit(")", 1)[-1].split()
    except FileNotFoundError:
        return False
    return not (fields and fields[0] == "Z")


def wait_gone(pid: int, timeout_s: float = 10.0) -> bool:
    """Wait until the process is gone; return whether it went within the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)


def child_pids(pid: int) -> list[int]:
    """The live processes whose parent is `pid`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    """Every live process below `pid`, children first."""
    found: list[int] = []
    pending = [pid]
    while pending:
        children = child_pids(pending.pop())
        found.extend(children)
        pending.extend(children)
    return found


def session_members(session: int) -> list[int]:
    """The live processes of a session (orphans re-parented to init included)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if os.getsid(int(entry.name)) == session:
                    found.append(int(entry.name))
    return found


def kill_tree(pid: int) -> None:
    """SIGKILL a process and everything below it, in whatever process group or, when it
    leads a session, whatever part of its session they are."""
    for target in {pid, *descendants(pid), *session_members(pid)}:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, signal.SIGKILL)
