"""A scripted OpenAI-compatible chat-completions server on loopback, for tests.

It is a real HTTP server (stdlib, one thread per connection) on 127.0.0.1 and a free
port. It answers `POST /v1/chat/completions` from a script, a queue of replies the test
lays out in advance, and records every request it received so tests can assert the
exact prompt, headers and `response_format`::

    with scripted_llm_servers() as start:          # or the `llm_server` fixtures
        server = start()
        server.script(
            error(429, headers={"Retry-After": "1"}),
            reply('{"decision_index": 1, "reason": "r", "expected_decision": null}'),
        )
        ...  # a backend with endpoint=server.endpoint
        assert server.requests[1].body["messages"][0]["content"] == "..."

A reply can be delayed (to exceed a client's timeout), held until the test lets it go
(`held`), carry any status, headers or raw body, or drop the connection without
answering. When the script runs out, the server answers `responder(body)` when given one
(a reply made from the request's JSON body), else `default` (a 500 saying so, unless
given), so a test that asks more than it scripted fails visibly. `max_in_flight` is the
most requests it served at once.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted answer: an assistant `content` in OpenAI's shape, or a raw `body`."""

    status: int = 200
    content: str | None = None
    body: bytes | None = None  # sent as is instead of a completion built from `content`
    headers: Mapping[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering
    gate: threading.Event | None = field(default=None, compare=False)  # answer once set
    usage: tuple[int, int] | None = (10, 5)  # prompt and completion tokens; None: no usage
    model: str = "scripted-model"
    drop: bool = False  # close the connection without any answer


def reply(
    content: str, *, usage: tuple[int, int] | None = (10, 5), **options: Any
) -> ScriptedReply:
    """A successful completion whose assistant message is `content`."""
    return ScriptedReply(content=content, usage=usage, **options)


def json_reply(value: object, **options: Any) -> ScriptedReply:
    """A successful completion whose assistant message is `value` as JSON."""
    return reply(json.dumps(value), **options)


def error(
    status: int, message: str = "scripted error", *, headers: Mapping[str, str] | None = None
) -> ScriptedReply:
    """An error answer in OpenAI's `{"error": {"message", "type", "code"}}` shape."""
    body = {"error": {"message": message, "type": "scripted", "code": status}}
    return ScriptedReply(status=status, body=json.dumps(body).encode(), headers=headers or {})


def raw(body: bytes | str, *, status: int = 200, **options: Any) -> ScriptedReply:
    """An answer with exactly this body (for replies that are not chat completions)."""
    data = body.encode() if isinstance(body, str) else body
    return ScriptedReply(status=status, body=data, **options)


def tool_calls_reply(
    *calls: tuple[str, str | dict[str, Any]], content: str | None = None
) -> ScriptedReply:
    """A completion whose assistant message holds these function calls (name, arguments)."""
    message = {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
            for i, (name, args) in enumerate(calls)
        ],
    }
    body = {"id": "x", "object": "chat.completion", "model": "m", "choices": [
        {"index": 0, "message": message, "finish_reason": "tool_calls"}]}  # fmt: skip
    return raw(json.dumps(body))


def delayed(delay_s: float, then: ScriptedReply | None = None) -> ScriptedReply:
    """`then` (a plain completion of "{}" by default), answered after `delay_s` seconds."""
    return replace(then if then is not None else reply("{}"), delay_s=delay_s)


def held(gate: threading.Event, then: ScriptedReply | None = None) -> ScriptedReply:
    """`then` (a plain completion of "{}" by default), answered once the test sets `gate`."""
    return replace(then if then is not None else reply("{}"), gate=gate)


def dropped() -> ScriptedReply:
    """Close the connection without answering, as a crashing server would."""
    return ScriptedReply(drop=True)


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received: path, headers (lower-cased names) and body."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    received_at: float  # time.monotonic()

    @property
    def body(self) -> Any:
        """The body decoded as JSON (None if it is not JSON)."""
        try:
            return json.loads(self.raw)
        except ValueError:
            return None


def completion_body(reply: ScriptedReply, number: int) -> bytes:
    """OpenAI's chat-completion object for a scripted reply."""
    data: dict[str, Any] = {
        "id": f"chatcmpl-scripted-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": "stop",
            }
        ],
    }
    if reply.usage is not None:
        prompt, completion = reply.usage
        data["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
    return json.dumps(data).encode()


class ScriptedLLMServer:
    """The server; `start()` it (or use it as a context manager), then `script()` replies."""

    def __init__(
        self,
        default: ScriptedReply | None = None,
        responder: Callable[[Any], ScriptedReply] | None = None,
    ) -> None:
        self.default = default or error(500, "the scripted server has no reply left")
        self.responder = responder
        self._script: deque[ScriptedReply] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._numbers = itertools.count(1)
        self._in_flight = 0
        self.max_in_flight = 0
        self._httpd = _QuietServer(("127.0.0.1", 0), _handler_for(self))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The loopback port the server listens on."""
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        """The server's base URL, `http://127.0.0.1:<port>`."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def endpoint(self) -> str:
        """The full chat-completions URL, as a backend's `endpoint` setting takes it."""
        return self.url + CHAT_PATH

    def script(self, *replies: ScriptedReply) -> None:
        """Queue replies, answered in order, one per request."""
        with self._lock:
            self._script.extend(replies)

    @property
    def pending(self) -> int:
        """How many scripted replies are still unused."""
        with self._lock:
            return len(self._script)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    def start(self) -> ScriptedLLMServer:
        """Serve in a background thread."""
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, cut delayed replies short and close the socket."""
        self._stopping.set()
        if self._thread is not None:
            self._httpd.shutdown()
            self._thread.join(timeout=5)
        self._httpd.server_close()

    def __enter__(self) -> ScriptedLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _next(self, request: RecordedRequest) -> tuple[ScriptedReply, int]:
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            if self._script:
                chosen = self._script.popleft()
            elif self.responder is not None:
                chosen = self.responder(request.body)
            else:
                chosen = self.default
            return chosen, next(self._numbers)

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _wait(self, scripted: ScriptedReply) -> None:
        if scripted.delay_s > 0:
            self._stopping.wait(scripted.delay_s)
        while scripted.gate is not None and not self._stopping.is_set():
            if scripted.gate.wait(0.05):
                return


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Ignore clients that hang up (timeouts in tests do that on purpose)."""
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


def _handler_for(server: ScriptedLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers and httpx's pool use

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            request = RecordedRequest(
                method="POST",
                path=self.path,
                headers={name.lower(): value for name, value in self.headers.items()},
                raw=self.rfile.read(length),
                received_at=time.monotonic(),
            )
            server._record(request)
            if self.path != CHAT_PATH:
                self._send(404, b'{"error": {"message": "not found"}}', {})
                return
            scripted, number = server._next(request)
            try:
                server._wait(scripted)
                if scripted.drop:
                    self.close_connection = True
                    return
                body = (
                    scripted.body
                    if scripted.body is not None
                    else completion_body(scripted, number)
                )
                self._send(scripted.status, body, scripted.headers)
            except OSError:  # the client gave up (timeout) and closed the connection
                self.close_connection = True
            finally:
                server._done()

        def _send(self, status: int, body: bytes, headers: Mapping[str, str]) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

        def log_message(self, format: str, *args: Any) -> None:
            """Stay quiet: tests read `requests`, not the access log."""

    return Handler


@contextmanager
def scripted_llm_servers() -> Iterator[Callable[..., ScriptedLLMServer]]:
    """Yield a factory of started servers; every one is stopped when the block ends."""
    started: list[ScriptedLLMServer] = []

    def start(default: ScriptedReply | None = None) -> ScriptedLLMServer:
        server = ScriptedLLMServer(default).start()
        started.append(server)
        return server

    try:
        yield start
    finally:
        for server in started:
            server.stop()
