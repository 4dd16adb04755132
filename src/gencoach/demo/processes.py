"""The demo's child processes: started with their logs in files, waited for, always stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx


class ChildError(RuntimeError):
    """A child process did not come up; the message ends with the tail of its log."""


class Child:
    """One `python -m gencoach ...` process in its own session, logging to a file."""

    def __init__(self, name: str, args: list[str], log_path: Path) -> None:
        self.name = name
        self.args = args
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the process (stdin closed, output to the log file)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gencoach", *self.args],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                start_new_session=True,  # Ctrl-C reaches the demo, which stops us in order
            )

    def wait_healthy(self, url: str, timeout_s: float = 30.0) -> None:
        """Wait until `url` answers 200, or raise ChildError with the log's tail."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                raise ChildError(f"{self.name} exited at start-up:\n{self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url, timeout=0.5).status_code == httpx.codes.OK:
                    return
            time.sleep(0.1)
        raise ChildError(f"{self.name} did not answer {url} in {timeout_s:.0f} s:\n{self.tail()}")

    def tail(self, lines: int = 15) -> str:
        """The end of the process's log."""
        if not self.log_path.is_file():
            return ""
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left after `grace_s`."""
        process = self.process
        if process is None or process.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(5)
        # Workers move into process groups of their own, but stay in the session.
        kill_leftovers(process.pid)


def kill_leftovers(session: int) -> None:
    """SIGKILL every process left in a session (our child started it, so its id is the pid)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if os.getsid(int(entry.name)) == session:
                os.kill(int(entry.name), signal.SIGKILL)
