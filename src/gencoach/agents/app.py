"""The agent app factory: protocol 2.0 routes around an author's policy and coach.

`create_agent_app(info, policy, coach)` builds the app (its docstring lists the routes
and what they refuse); `refusal` is the shape of a refused body's answer.
"""

from __future__ import annotations

import json

import anyio
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse, Response

from gencoach.agents.coach import Coach, CoachingOutcome
from gencoach.agents.memory import Memory, coached_decision
from gencoach.agents.policy import Decided, Policy, PolicyError
from gencoach.agents.sessions import SessionRefusedError, SessionStore
from gencoach.config.scrubbing import scrub_value
from gencoach.errors import ContractError, ContractViolation
from gencoach.protocol import (
    COACHING_KEY,
    DECISION_SOURCE_CAPABILITY,
    AgentDecision,
    AgentHealth,
    AgentInfo,
    AgentInput,
    AgentRequest,
    AgentResponse,
    CoachingSessionConfig,
    JsonObject,
    SpecializedCoachingRequest,
    SpecializedCoachingResponse,
)
from gencoach.protocol.media import not_json_refusal
from gencoach.runtime.logs import bound, get_logger
from gencoach.workers.backends.python import error_summary

log = get_logger("agents.app")


def refusal(error: ContractError, status: int = 422) -> JSONResponse:
    """The answer to a refused body: every field and why, as `{"detail": [{field, reason}]}`."""
    detail = [{"field": v.field, "reason": v.reason} for v in error.violations]
    return JSONResponse({"detail": detail}, status)


async def _json_only(request: Request) -> None:
    """Refuse a body not sent as JSON with 415, before its route reads it."""
    why = not_json_refusal(request.headers.get("content-type"))
    if why is not None:
        raise HTTPException(415, why)


_JSON_BODY = [Depends(_json_only)]


def _within(error: ContractError, prefix: str, model: str) -> ContractError:
    """The error with its fields located under `prefix` of the request body."""
    violations = [
        ContractViolation(prefix if v.field == error.model else f"{prefix}.{v.field}", v.reason)
        for v in error.violations
    ]
    return ContractError(model, violations)


def _prepare(request: AgentRequest) -> list[tuple[Memory, AgentDecision | None]]:
    """Each input's memory and imposed decision, or ContractError naming the field."""
    prepared = []
    for index, item in enumerate(request.inputs):
        try:
            memory = Memory.of(item)
        except ContractError as error:
            raise _within(error, f"inputs.{index}.memory", "AgentRequest") from None
        try:
            coached = coached_decision(item)
        except ContractError as error:
            where = f"inputs.{index}.extra_keys.{COACHING_KEY}"
            raise _within(error, where, "AgentRequest") from None
        prepared.append((memory, coached))
    return prepared


def _coached(item: AgentInput, decision: AgentDecision, request_id: str) -> list[Decided]:
    step: JsonObject = {
        "id": f"coaching-{request_id}-{item.id}",
        "component": "coaching",
        "origin": "coaching",
        "full_prompt": "",
        "input_elements": {COACHING_KEY: item.extra_keys[COACHING_KEY]},
        "output_raw": json.dumps(decision.model_dump(mode="json")),
    }
    return [Decided.of(decision, internal_steps=[step])] * item.num_outputs


async def _decide(policy: Policy, item: AgentInput, memory: Memory) -> list[Decided]:
    count = item.num_outputs
    try:
        decided = await policy.decide(item, memory, count)
    except PolicyError as error:
        return [Decided.failed(error.code, error.message)] * count
    except Exception as error:
        log.exception("agent.policy_crashed", source_id=item.id)
        return [Decided.failed("policy_crashed", error_summary(error))] * count
    if len(decided) != count:
        message = f"the policy returned {len(decided)} candidates, {count} were asked"
        return [Decided.failed("policy_error", message)] * count
    return decided


def _output(request_id: str, item: AgentInput, index: int, memory: Memory, got: Decided) -> object:
    if got.decision is not None:
        after = got.memory or memory.after(item.instruction, got.decision)
        output: object = got.decision.model_dump(mode="json")
        error: object = None
    else:
        assert got.error is not None
        after = got.memory or memory
        output, error = None, got.error.model_dump(mode="json")
    return {
        "request_id": request_id,
        "source_id": item.id,
        "candidate_index": index,
        "status": "completed" if got.decision is not None else "error",
        "memory": after.to_json(),
        "internal_steps": got.internal_steps,
        "output": output,
        "error": error,
    }


def create_agent_app(
    info: AgentInfo,
    policy: Policy,
    coach: Coach | None = None,
    *,
    sessions: SessionStore | None = None,
) -> FastAPI:
    """The FastAPI app of an agent; coaching routes exist when `coach` is given.

    It serves `GET /health`, `GET /v1/info`, `POST /v1/responses` and, when the agent
    announces specialized coaching, the session routes and `POST /v1/coaching`. Bodies
    must be sent as `application/json` (415 otherwise, as the controller answers) and are
    validated strictly (422 with every refused field and why), and every answer is
    validated before it is sent: a policy's or a coach's mistake becomes an error
    candidate, a 500 or a coaching `error`, never an invalid answer. An input carrying a
    correction under `extra_keys.coaching` (`replace_decision`, or `replace_say` as words
    alone) is answered with that decision without calling the policy. Answers are
    scrubbed of the open coaching sessions' credentials (see `SessionStore`).

    An agent announcing specialized coaching needs a coach, and a coach needs kinds to
    announce: either mismatch raises ValueError. `sessions` defaults to a new store.
    """
    if bool(info.specialized_coaching) != (coach is not None):
        raise ValueError("give a coach exactly when info.specialized_coaching lists kinds")
    app = FastAPI(title=info.agent_id, version=info.agent_version)
    info_body = info.model_dump(mode="json")
    # This toolkit reads `decision_source` in the payloads gencoach writes: it says so,
    # unless the author said otherwise.
    info_body["capabilities"] = {DECISION_SOURCE_CAPABILITY: True, **info.capabilities}

    @app.get("/health")
    async def health() -> JSONResponse:
        """Ready as soon as the app exists: policies are built before it."""
        return JSONResponse(AgentHealth().model_dump(mode="json"))

    @app.get("/v1/info")
    async def get_info() -> JSONResponse:
        """The agent's announcement."""
        return JSONResponse(info_body)

    @app.post("/v1/responses", dependencies=_JSON_BODY)
    async def responses(request: Request) -> Response:
        """Candidates for every input, in input order then candidate order."""
        try:
            agent_request = AgentRequest.parse_json(await request.body())
            prepared = _prepare(agent_request)
        except ContractError as error:
            return refusal(error)
        with bound(request_id=agent_request.request_id):
            return await _respond(policy, agent_request, prepared)

    if coach is not None:
        _add_coaching_routes(app, info, coach, sessions or SessionStore())
    return app


async def _respond(
    policy: Policy,
    request: AgentRequest,
    prepared: list[tuple[Memory, AgentDecision | None]],
) -> Response:
    results: list[list[Decided]] = [[] for _ in request.inputs]

    async def run(position: int, item: AgentInput, memory: Memory) -> None:
        coached = prepared[position][1]
        if coached is not None:
            results[position] = _coached(item, coached, request.request_id)
        else:
            results[position] = await _decide(policy, item, memory)

    async with anyio.create_task_group() as group:
        for position, (item, (memory, _)) in enumerate(zip(request.inputs, prepared, strict=True)):
            group.start_soon(run, position, item, memory)
    # An error candidate may quote a backend's refusal, and with it a credential.
    body = [
        scrub_value(_output(request.request_id, item, index, memory, got))
        for item, (memory, _), decided in zip(request.inputs, prepared, results, strict=True)
        for index, got in enumerate(decided)
    ]
    try:
        AgentResponse.parse(body).validate_request(request)
    except ContractError as error:
        log.error("agent.invalid_answer", error=str(error))
        return JSONResponse({"detail": f"the agent's answer broke the protocol: {error}"}, 500)
    return JSONResponse(body)


def _add_coaching_routes(app: FastAPI, info: AgentInfo, coach: Coach, store: SessionStore) -> None:
    @app.put("/v1/coaching/sessions/{run_id:path}", dependencies=_JSON_BODY)
    async def open_session(run_id: str, request: Request) -> Response:
        """Open the run's session: 204, 409 for another config, 503 for a dead backend."""
        try:
            config = CoachingSessionConfig.parse_json(await request.body())
            await store.open(run_id, config)
        except ContractError as error:
            return refusal(error)
        except SessionRefusedError as refused:
            log.warning("agent.session_refused", run_id=run_id, detail=refused.detail)
            return JSONResponse({"detail": refused.detail}, refused.status)
        return Response(status_code=204)

    @app.delete("/v1/coaching/sessions/{run_id:path}")
    async def close_session(run_id: str) -> Response:
        """Close the run's session: 204, or 404 when it has none."""
        if not store.close(run_id):
            return JSONResponse({"detail": f"no coaching session for run {run_id}"}, 404)
        return Response(status_code=204)

    @app.post("/v1/coaching", dependencies=_JSON_BODY)
    async def coaching(request: Request) -> Response:
        """Repair a decision: the coach's outcome, validated against the request."""
        try:
            coaching_request = SpecializedCoachingRequest.parse_json(await request.body())
        except ContractError as error:
            return refusal(error)
        if coaching_request.kind not in info.specialized_coaching:
            reason = (
                f"this agent does not coach {coaching_request.kind!r}; "
                f"it announces {info.specialized_coaching}"
            )
            return refusal(ContractError("request", [ContractViolation("kind", reason)]))
        session = store.get(coaching_request.run_id)
        if session is None and coach.requires_session:
            run_id = coaching_request.run_id
            detail = f"no coaching session for run {run_id}; PUT /v1/coaching/sessions/{run_id}"
            return JSONResponse({"detail": detail}, 404)
        with bound(run_id=coaching_request.run_id, request_id=coaching_request.request_id):
            try:
                outcome = await coach.coach(coaching_request, session)
            except Exception as error:
                log.exception("agent.coach_crashed")
                outcome = CoachingOutcome.failed(f"the coach failed: {error_summary(error)}")
            if session is not None and not session.capture_logs:
                outcome = CoachingOutcome(outcome.status, outcome.proposals, outcome.reason)
            return JSONResponse(_coaching_answer(coaching_request, outcome))


def _coaching_answer(request: SpecializedCoachingRequest, outcome: CoachingOutcome) -> JsonObject:
    # A backend's refusal quoted in a reason or a log may hold a session's credential.
    body: JsonObject = scrub_value(
        {
            "logs": [log_entry.model_dump(mode="json") for log_entry in outcome.logs],
            "request_id": request.request_id,
            "status": outcome.status,
            "proposals": [proposal.model_dump(mode="json") for proposal in outcome.proposals],
            "reason": outcome.reason,
        }
    )
    try:
        SpecializedCoachingResponse.parse(body).validate_request(request)
    except ContractError as error:
        log.error("agent.invalid_coaching_answer", error=str(error))
        body.update(
            status="error", proposals=[], reason=f"the coach's answer broke the contract: {error}"
        )
    return body
