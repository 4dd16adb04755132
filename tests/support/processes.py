"""Process helpers for tests that start, kill and look for processes."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path


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


def free_port() -> int:
    """A loopback TCP port nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
