"""HTTP read deadlines and a connection limit, on uvicorn's h11 protocol.

`deadline_protocol` makes the protocol class: a header deadline (408), a body deadline
and a connection limit (503 at once). What clients see: docs/operations.md, "Limits on
what clients send".
"""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

Waiting = Literal["headers", "body"]

REFUSED_LINGER_S = 2.0
"""The longest a refused connection stays open after its 503, for the client to read it."""


def _refusal(max_connections: int) -> bytes:
    detail = (
        f"the controller has {max_connections} connections open (api.max_connections): "
        "retry shortly"
    )
    body = json.dumps({"detail": detail}).encode()
    return (
        b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n"
        + f"retry-after: 1\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )


def deadline_protocol(
    header_timeout_s: float, body_timeout_s: float, max_connections: int
) -> type[H11Protocol]:
    """uvicorn's h11 protocol class with these deadlines and connection limit.

    uvicorn bounds neither how long a client may take to send a request's headers nor its
    body: its keep-alive timer restarts on every byte, so a client sending one byte a
    second holds a connection (and, with a body, a request) for as long as it likes.
    Here a connection must send a request's whole head within `header_timeout_s` of
    opening (or of the previous response's end), else it is answered 408 and closed; the
    whole body must arrive within `body_timeout_s` of the head, else the connection is
    closed (the route sees the client go). A connection opened while `max_connections`
    are open is answered 503 with `Retry-After` at once and closed as soon as the client
    has read it (at most `REFUSED_LINGER_S` later), before it can hold anything.
    Answering, rather than closing in silence, tells a client why; the brief linger keeps
    the kernel from resetting the connection under the answer when the client's request
    arrives after it.
    """

    refusal = _refusal(max_connections)

    class DeadlineProtocol(H11Protocol):
        _timer: asyncio.TimerHandle | None = None
        _waiting: Waiting | None = None
        _refused = False

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_connections:
                self._refused = True
                transport.write(refusal)
                if transport.can_write_eof():
                    transport.write_eof()
                self._timer = self.loop.call_later(REFUSED_LINGER_S, transport.close)
                return
            self._watch()

        def data_received(self, data: bytes) -> None:
            if not self._refused:
                super().data_received(data)
            # A refused connection's request is read and dropped: it was answered already.

        def eof_received(self) -> None:
            if self._refused:
                self.transport.close()  # the client read the answer and is done
                return
            super().eof_received()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            self._watch()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._watch()

        def _cancel(self) -> None:
            if self._timer is not None:
                self._timer.cancel()
            self._timer, self._waiting = None, None

        def _watch(self) -> None:
            """Arm the deadline of what the connection waits for now, if it changed."""
            state = self.conn.their_state
            waiting: Waiting | None = (
                "headers" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
            )
            if waiting == self._waiting or self.transport.is_closing():
                return
            self._cancel()
            if waiting is not None:
                delay = header_timeout_s if waiting == "headers" else body_timeout_s
                self._timer = self.loop.call_later(delay, self._expired, waiting)
                self._waiting = waiting

        def _expired(self, waiting: Waiting) -> None:
            self._timer, self._waiting = None, None
            if self.transport.is_closing():
                return
            if waiting == "headers":
                detail = f"the request's headers took over {header_timeout_s:g} s"
                body = json.dumps({"detail": f"{detail} (api.header_timeout_s)"}).encode()
                self.transport.write(
                    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
                    + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
                    + body
                )
            self.transport.close()

    return DeadlineProtocol
