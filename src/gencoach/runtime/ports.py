"""A loopback port for a server this process is about to start (an embedded Redis, the
demo's controller), chosen below the kernel's ephemeral range (see `free_port`)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_DEFAULT_EPHEMERAL_LOW = 32_768  # Linux's default
_SPAN = 12_000  # ports tried below the ephemeral range
_TRIES = 64


def free_port() -> int:
    """A loopback TCP port nobody listens on right now, below the kernel's ephemeral
    range when there is room there (else one the kernel picks).

    A port the kernel hands out for `bind(0)` comes from the range it also gives outgoing
    connections: between the choice and the server's own bind, any connection the
    machine opens may take it, and the server then fails with "address already in use".
    """
    low = _ephemeral_low()
    ports = range(max(1_024, low - _SPAN), low)
    choose = random.SystemRandom()  # not the seeded `random`: parallel callers differ
    for _ in range(_TRIES if ports else 0):
        port = choose.choice(ports)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        chosen: int = probe.getsockname()[1]
        return chosen


def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_EPHEMERAL_LOW
