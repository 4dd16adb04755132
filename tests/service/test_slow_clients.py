"""A slow client cannot hold the controller: header and body deadlines, a connection limit.

Each test talks to a real controller through a raw socket that sends a byte at a time.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable

import httpx
import pytest
import redis

from gencoach.constants import Keys
from tests.support.controller import ControllerProcess

pytestmark = pytest.mark.slow

DEADLINE_S = 2.0
# The slow client keeps sending for far longer than the deadline.
TRICKLE_S = 30.0
JSON_HEADERS = {"Content-Type": "application/json"}


@pytest.fixture
def bounded(controller_factory: Callable[..., ControllerProcess]) -> ControllerProcess:
    """A controller with 2 s deadlines and at most 8 open connections."""
    process = controller_factory(
        api={"header_timeout_s": DEADLINE_S, "body_timeout_s": DEADLINE_S, "max_connections": 8}
    )
    process.start()
    return process


def _connect(controller: ControllerProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", controller.port), timeout=TRICKLE_S)


def _trickle(sock: socket.socket, data: bytes) -> tuple[bytes, float]:
    """Send `data` a byte every 0.2 s until the server closes; what it said, and when."""
    started = time.monotonic()
    sock.settimeout(0.2)
    answer = b""
    for byte in data:
        try:
            sock.send(bytes([byte]))
            chunk = sock.recv(4096)
        except TimeoutError:
            continue
        except OSError:
            break
        answer += chunk
        if not chunk:
            break
        if time.monotonic() - started > TRICKLE_S:
            break
    return answer, time.monotonic() - started


def test_headers_sent_a_byte_at_a_time_are_cut_off_with_408(bounded: ControllerProcess) -> None:
    """A client still sending its headers after header_timeout_s gets 408 and is closed."""
    with _connect(bounded) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer, took = _trickle(sock, b"X-Slow: " + b"a" * 400)
    assert answer.startswith(b"HTTP/1.1 408 Request Timeout"), answer
    assert b"api.header_timeout_s" in answer
    assert took < TRICKLE_S / 2
    assert httpx.get(f"{bounded.url}/health").status_code == 200


def test_a_body_sent_a_byte_at_a_time_is_not_waited_on(
    bounded: ControllerProcess, redis_client: redis.Redis
) -> None:
    """A valid batch still arriving after body_timeout_s: the connection is closed before
    it is complete, and nothing of it is stored (sent whole, it would be accepted)."""
    event = json.dumps([{"type": "run.finished", "run_id": "slow", "seq": 0}])
    body = event.rjust(100).encode()  # leading spaces: 20 s of trickling, still valid JSON
    with _connect(bounded) as sock:
        sock.sendall(
            b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
            b"\r\nContent-Length: %d\r\n\r\n" % len(body)
        )
        answer, took = _trickle(sock, body)
    assert b" 202 " not in answer, answer
    assert took < TRICKLE_S / 2
    keys = Keys()
    assert (redis_client.xlen(keys.events), redis_client.xlen(keys.dead_events)) == (0, 0)
    assert httpx.get(f"{bounded.url}/health").status_code == 200
    sent = httpx.post(f"{bounded.url}/v1/events", content=body, headers=JSON_HEADERS)
    assert sent.status_code == 202, sent.text  # the same batch, sent at once, is taken


def test_connections_beyond_the_limit_are_refused_at_once(bounded: ControllerProcess) -> None:
    """With 8 connections open, a ninth is answered 503 and closed; once they are cut off,
    clients get in."""
    held = [_connect(bounded) for _ in range(8)]
    try:
        for sock in held:  # an answer on each: the server holds all eight open
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert sock.recv(4096).startswith(b"HTTP/1.1 200")
        with _connect(bounded) as extra:
            extra.settimeout(5)
            extra.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = b""
            while chunk := extra.recv(4096):  # answered, then closed by the server
                answer += chunk
            head, _, body = answer.partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 503"), answer
            assert b"retry-after: 1" in head.lower(), answer
            assert b"api.max_connections" in body, answer
    finally:
        for sock in held:
            sock.close()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{bounded.url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError("the controller took no new connection after the held ones closed")
