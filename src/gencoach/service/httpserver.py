"""Serving an ASGI app with uvicorn inside the daemon's task group.

uvicorn normally owns the process's signals; here the controller owns them, so the
server is told to leave them alone and is stopped through `stop()`.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import anyio
import uvicorn
from anyio.abc import TaskStatus
from starlette.types import ASGIApp


class _Server(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class HttpServer:
    """An ASGI app on host:port; port 0 picks a free port, readable once started."""

    def __init__(self, app: ASGIApp, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._socket: socket.socket | None = None
        config = uvicorn.Config(
            app, host=host, port=port, log_config=None, access_log=False, lifespan="off"
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
        sock = socket.socket(family, socket.SOCK_STREAM)
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
