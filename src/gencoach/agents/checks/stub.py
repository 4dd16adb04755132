"""A stub OpenAI-compatible backend on loopback, for the sessions the checker opens.

Agents probe session backends and may ask them during coaching; the stub answers every
POST with a chat completion holding one decision as JSON, and every GET with 200.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from types import TracebackType

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from gencoach.agents.checks.payloads import STUB_DECISION


async def _completion(request: Request) -> JSONResponse:
    if request.method == "GET":
        return JSONResponse({"status": "ok"})
    message = {"role": "assistant", "content": json.dumps(STUB_DECISION)}
    return JSONResponse(
        {
            "id": "chatcmpl-checker",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "checker-model",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
    )


class StubBackend:
    """The stub, served by uvicorn in a daemon thread while the `with` block runs."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind((host, 0))
        self.host, self.port = self._socket.getsockname()[:2]
        app = Starlette(routes=[Route("/{path:path}", _completion, methods=["GET", "POST"])])
        config = uvicorn.Config(app, log_config=None, lifespan="off", access_log=False)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def endpoint(self) -> str:
        """The full chat-completions URL, as a session's backend `endpoint`."""
        return f"http://{self.host}:{self.port}/v1/chat/completions"

    def __enter__(self) -> StubBackend:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the checker's stub backend did not start")
            time.sleep(0.01)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._socket.close()
