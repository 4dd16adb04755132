"""A hand-written protocol-2.0 agent, correct unless told which one rule to break.

It is deliberately not built on the toolkit (which would refuse to send a broken answer):
each flaw is what a real agent author might get wrong.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from gencoach.errors import ContractError
from gencoach.protocol import AgentRequest, CoachingSessionConfig, SpecializedCoachingRequest

FLAWS = (
    "protocol_version",  # announces protocol 1.0
    "info_extra_field",  # /v1/info carries a field the protocol does not know
    "out_of_order",  # candidates in reverse order
    "wrong_count",  # one candidate per input, whatever num_outputs says
    "merged_memory",  # keeps one memory across requests and merges into it
    "unoffered_point",  # proposes at `recovery` whatever the request offers
    "put_not_idempotent",  # a second PUT of the same config is a conflict
    "lenient_requests",  # accepts requests with duplicate input ids
    "delete_keeps_session",  # DELETE answers 200 and keeps the session
    "ignores_coaching",  # answers a reinjected input as any other, correction unread
    "flat_coaching",  # looks for the correction flat in extra_keys, not under `coaching`
    "wrapped_proposal",  # wraps its proposals' payload as {"coaching": payload}
)


def _coached(extra_keys: dict[str, Any], flaw: str | None) -> dict[str, Any] | None:
    """The decision a reinjected correction imposes, as this agent reads it."""
    if flaw == "ignores_coaching":
        return None
    payload = extra_keys if flaw == "flat_coaching" else extra_keys.get("coaching")
    if not isinstance(payload, dict):
        return None
    if payload.get("kind") == "replace_decision":
        return dict(payload["decision"])
    if payload.get("kind") == "replace_say":
        return {"say": payload["text"], "tool_calls": []}
    return None


def broken_agent(flaw: str | None = None) -> FastAPI:
    """The agent's app, with `flaw` (one of FLAWS) or none."""
    assert flaw is None or flaw in FLAWS
    app = FastAPI()
    sessions: dict[str, Any] = {}
    shared_history: list[dict[str, str]] = []

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ready"}

    @app.get("/v1/info")
    async def info() -> dict[str, Any]:
        body: dict[str, Any] = {
            "protocol_version": "1.0" if flaw == "protocol_version" else "2.0",
            "agent_id": "hand-written",
            "agent_version": "0.1",
            "specialized_coaching": ["failure", "suboptimal"],
            "coaching_resume": False,
            "coaching_unavailable_reason": None,
            "capabilities": {},
        }
        if flaw == "info_extra_field":
            body["model_name"] = "gpt-x"
        return body

    @app.post("/v1/responses")
    async def respond(request: Request) -> Response:
        raw = await request.json()
        if flaw != "lenient_requests":
            try:
                AgentRequest.parse(raw)
            except ContractError as error:
                return JSONResponse({"detail": str(error)}, 422)
        outputs = []
        for item in raw["inputs"]:
            history = (
                shared_history
                if flaw == "merged_memory"
                else list(item.get("memory", {}).get("history", []))
            )
            history.append({"author": "USER", "content": item["instruction"]["content"]})
            count = 1 if flaw == "wrong_count" else item.get("num_outputs", 1)
            decision = _coached(item.get("extra_keys", {}), flaw) or {"say": "ok", "tool_calls": []}
            for index in range(count):
                outputs.append({
                    "request_id": raw["request_id"], "source_id": item["id"],
                    "candidate_index": index, "status": "completed",
                    "memory": {"history": list(history)}, "internal_steps": [],
                    "output": decision, "error": None,
                })  # fmt: skip
        if flaw == "out_of_order":
            outputs.reverse()
        return JSONResponse(outputs)

    @app.put("/v1/coaching/sessions/{run_id}")
    async def open_session(run_id: str, request: Request) -> Response:
        try:
            config = CoachingSessionConfig.parse_json(await request.body())
        except ContractError as error:
            return JSONResponse({"detail": str(error)}, 422)
        if run_id in sessions and (sessions[run_id] != config or flaw == "put_not_idempotent"):
            return JSONResponse({"detail": "conflict"}, 409)
        sessions[run_id] = config
        return Response(status_code=204)

    @app.delete("/v1/coaching/sessions/{run_id}")
    async def close_session(run_id: str) -> Response:
        if flaw == "delete_keeps_session":
            return JSONResponse({"closed": False}, 200)
        if sessions.pop(run_id, None) is None:
            return JSONResponse({"detail": "unknown run"}, 404)
        return Response(status_code=204)

    @app.post("/v1/coaching")
    async def coach(request: Request) -> Response:
        body = SpecializedCoachingRequest.parse_json(await request.body())
        point = "recovery" if flaw == "unoffered_point" else body.reinjection_points[-1].id
        payload = {"kind": "replace_decision", "decision": {"say": "fixed", "tool_calls": []}}
        if flaw == "wrapped_proposal":
            payload = {"coaching": payload}
        return JSONResponse({
            "logs": [], "request_id": body.request_id, "status": "corrected", "reason": None,
            "proposals": [{"reinjection_point_id": point, "extra_keys": payload}],
        })  # fmt: skip

    return app
