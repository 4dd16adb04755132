"""A real protocol-2.0 agent on loopback whose answers a test scripts.

It serves the agent routes with FastAPI on uvicorn, in a thread: `GET /health`,
`GET /v1/info`, `POST /v1/responses`, the coaching session routes and
`POST /v1/coaching`. It records every request body, answers `/v1/responses` with a
fixed decision (or the `replace_decision` found under `extra_keys.coaching`), changed
by the test's `answer(input, candidate_index)` script when it has one, and
`/v1/coaching` from a queue of scripted replies, by default a correction at the
first offered reinjection point.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from tests.support.processes import STARTUP_S, free_port

Json = dict[str, Any]
DEFAULT_DECISION: Json = {
    "say": "",
    "tool_calls": [
        {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}
    ],
}


Serve = Callable[[Any], str]
"""The `serve` fixture of the agent tests: serve an ASGI app on loopback; its URL."""


def default_info(**changes: Any) -> Json:
    """An announcement offering every kind of coaching."""
    info: Json = {
        "protocol_version": "2.0",
        "agent_id": "scripted-agent",
        "agent_version": "1.0",
        "specialized_coaching": ["format", "failure", "suboptimal"],
        "coaching_resume": True,
        "coaching_unavailable_reason": None,
        "capabilities": {"tools": True},
    }
    info.update(changes)
    return info


def correction(request: Json) -> Json:
    """The default coaching answer: a replacement decision at the first offered point."""
    point = request["reinjection_points"][0]["id"]
    expected = (request.get("diagnosis") or {}).get("expected_decision") or "press sw4"
    decision = {**DEFAULT_DECISION, "say": f"corrected: {expected}"}
    return {
        "request_id": request["request_id"],
        "status": "corrected",
        "proposals": [
            {
                "reinjection_point_id": point,
                "extra_keys": {"kind": "replace_decision", "decision": decision},
            }
        ],
        "logs": [{"coaching_type": "repair", "content": f"repaired {request['kind']}"}],
        "reason": None,
    }


class ScriptedAgent:
    """The agent's state: what it announces, what it received, what it will answer."""

    def __init__(self) -> None:
        self.info: Json = default_info()
        self.sessions: dict[str, Json] = {}
        self.session_status: int | None = None  # force 409/503 on PUT when set
        self.coaching_requests: list[Json] = []
        self.response_requests: list[Json] = []
        self.coaching_replies: deque[Callable[[Json], tuple[int, Json]]] = deque()
        # When set, /v1/coaching answers only once this event is (a repair held open).
        self.coaching_gate: threading.Event | None = None
        # When set, /v1/responses answers only once this event is (a reinjection held open).
        self.responses_gate: threading.Event | None = None
        self.response_status: int | None = None  # answer /v1/responses with this error
        # Scripted answers: fields replacing those of the default output (e.g. "output",
        # "memory", or "status" with "error"), given the input (coaching included) and the
        # candidate index.
        self.answer: Callable[[Json, int], Json] | None = None
        self.lock = threading.Lock()
        self.url = ""

    def app(self) -> FastAPI:
        """The FastAPI application serving this agent."""
        app = FastAPI()

        @app.get("/health")
        async def health() -> Json:
            return {"status": "ready"}

        @app.get("/v1/info")
        async def info() -> Json:
            return self.info

        @app.put("/v1/coaching/sessions/{run_id:path}")
        async def open_session(run_id: str, request: Request) -> Response:
            body = await request.json()
            if self.session_status is not None:
                return JSONResponse({"detail": "scripted refusal"}, self.session_status)
            if run_id in self.sessions and self.sessions[run_id] != body:
                return JSONResponse({"detail": "a different session is open"}, 409)
            self.sessions[run_id] = body
            return Response(status_code=204)

        @app.delete("/v1/coaching/sessions/{run_id:path}")
        async def close_session(run_id: str) -> Response:
            if self.sessions.pop(run_id, None) is None:
                return JSONResponse({"detail": "unknown run"}, 404)
            return Response(status_code=204)

        @app.post("/v1/coaching")
        async def coach(request: Request) -> JSONResponse:
            body = await request.json()
            with self.lock:
                self.coaching_requests.append(body)
                script = self.coaching_replies.popleft() if self.coaching_replies else None
            if self.coaching_gate is not None:
                await anyio.to_thread.run_sync(self.coaching_gate.wait, abandon_on_cancel=True)
            status, answer = script(body) if script else (200, correction(body))
            return JSONResponse(answer, status)

        @app.post("/v1/responses")
        async def respond(request: Request) -> JSONResponse:
            body = await request.json()
            with self.lock:
                self.response_requests.append(body)
            if self.responses_gate is not None:
                await anyio.to_thread.run_sync(self.responses_gate.wait, abandon_on_cancel=True)
            if self.response_status is not None:
                return JSONResponse({"detail": "scripted outage"}, self.response_status)
            outputs = []
            for item in body["inputs"]:
                coaching = item.get("extra_keys", {}).get("coaching") or {}
                decision = coaching.get("decision", DEFAULT_DECISION)
                for index in range(item.get("num_outputs", 1)):
                    output = {
                        "request_id": body["request_id"],
                        "source_id": item["id"],
                        "candidate_index": index,
                        "status": "completed",
                        "memory": {"history": [], "coached": bool(coaching)},
                        "internal_steps": [],
                        "output": decision,
                        "error": None,
                    }
                    if self.answer is not None:
                        output.update(self.answer(item, index))
                    outputs.append(output)
            return JSONResponse(outputs)

        return app


class ThreadedServer:
    """An ASGI app served by uvicorn on a free loopback port, in a daemon thread."""

    def __init__(self, app: Any) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_config=None, lifespan="off"
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start serving and wait until it listens."""
        self.thread.start()
        deadline = time.monotonic() + STARTUP_S
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError(f"the threaded server did not start in {STARTUP_S} s")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stop serving and join the thread."""
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def scripted_agent() -> Iterator[ScriptedAgent]:
    """A scripted agent listening on loopback for the test's duration."""
    agent = ScriptedAgent()
    server = ThreadedServer(agent.app())
    server.start()
    agent.url = server.url
    yield agent
    server.stop()
