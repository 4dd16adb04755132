"""Serving an ASGI app with uvicorn inside the daemon's task group.

uvicorn normally owns the process's signals; here the controller owns them, so the
server is told to leave them alone and is stopped through `stop()`.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import anyio
import uvicorn
from anyio.abc import TaskStatus
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gencoach.service.web.deadlines import deadline_protocol


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a client may take to send a request, and how many connections may be open."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 256


class HttpServer:
    """An ASGI app on host:port; port 0 picks a free port, readable once started."""

    def __init__(
        self, app: ASGIApp, host: str, port: int, limits: ConnectionLimits | None = None
    ) -> None:
        self.host = host
        self.port = port
        self._socket: socket.socket | None = None
        bounds = limits or ConnectionLimits()
        protocol = deadline_protocol(
            bounds.header_timeout_s, bounds.body_timeout_s, bounds.max_connections
        )
        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_config=None,
            access_log=False,
            lifespan="off",
            http=protocol,
        )
        self._server = _Server(config)
        self._running = False

    @property
    def running(self) -> bool:
        """Whether the server is accepting or finishing requests."""
        return self._running

    def stop(self) -> None:
        """Stop accepting connections; requests in flight finish."""
        self._server.should_exit = True

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Bind, report readiness once listening, serve until stopped."""
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets that say TCP, and
        # without it a response's body waits for the client's delayed ACK (40 ms).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as error:
            sock.close()
            raise OSError(f"cannot listen on {self.host}:{self.port}: {error.strerror}") from None
        self.port = sock.getsockname()[1]
        self._running = True
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._server.serve, [sock])
                while not self._server.started:
                    if self._server.should_exit:
                        break
                    await anyio.sleep(0.01)
                task_status.started()
        finally:
            self._running = False
            sock.close()


class Concurrency:
    """ASGI middleware: at most `limit` requests served at once; the others wait their turn.

    A request that waits longer than `wait_s` is answered 503 with `Retry-After: 1`
    (the controller is busy), never left to fail on a resource behind the routes.
    """

    def __init__(self, app: ASGIApp, limit: int, wait_s: float) -> None:
        self.app = app
        self.limit = limit
        self.wait_s = wait_s
        self._slots = anyio.Semaphore(limit)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve the request once a slot is free, or refuse it after `wait_s`."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        acquired = False
        with anyio.move_on_after(self.wait_s):
            await self._slots.acquire()
            acquired = True
        if not acquired:
            detail = (
                f"the controller is busy: {self.limit} requests in progress for over "
                f"{self.wait_s:g} s (api.max_concurrent_requests); try again"
            )
            await _send_json(send, 503, {"detail": detail}, [(b"retry-after", b"1")])
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self._slots.release()


async def _send_json(
    send: Send, status: int, payload: object, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps(payload).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` is answered 413 and never kept.

    A declared `Content-Length` over the limit is refused before anything is read; a
    chunked body is read up to the limit and refused as soon as it passes it. A body
    within the limit is handed to the app as it was received.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the body's size, then pass the request on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", [])).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        chunks: list[bytes] = []
        received = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunk = message.get("body", b"")
            received += len(chunk)
            if received > self.max_bytes:
                await self._refuse(send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        detail = f"the request body is larger than {self.max_bytes} bytes (api.max_body_bytes)"
        await _send_json(send, 413, {"detail": detail}, [(b"connection", b"close")])
