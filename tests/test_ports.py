"""Ports for servers the service starts itself: never one an outgoing connection may take."""

from __future__ import annotations

import socket

import pytest

from gencoach.runtime import ports
from gencoach.runtime.ports import free_port


def test_a_free_port_is_below_the_ephemeral_range_and_bindable() -> None:
    """The port comes from below the kernel's range for outgoing connections, and a
    server can listen on it."""
    low = ports._ephemeral_low()
    for _ in range(20):
        port = free_port()
        assert port < low
        with socket.socket() as server:
            server.bind(("127.0.0.1", port))
            server.listen()


def test_a_port_in_use_is_not_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    """With every port of the range but one taken, the free one is chosen."""
    held: list[socket.socket] = []
    try:
        while True:  # three ports in a row nobody uses, the first two then held here
            base = free_port()
            try:
                for port in (base, base + 1, base + 2):
                    sock = socket.socket()
                    held.append(sock)
                    sock.bind(("127.0.0.1", port))
                break
            except OSError:
                for sock in held:
                    sock.close()
                held.clear()
        held.pop().close()
        monkeypatch.setattr(ports, "_ephemeral_low", lambda: base + 3)
        monkeypatch.setattr(ports, "_SPAN", 3)
        assert {free_port() for _ in range(10)} == {base + 2}
    finally:
        for sock in held:
            sock.close()
