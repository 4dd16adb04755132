"""The controller's HTTP API: health, event batches, and what runs look like."""

from __future__ import annotations

import hmac
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any

import redis.exceptions
from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from redis.asyncio import Redis

from gencoach.__about__ import __version__
from gencoach.constants import EVENT_FIELD, Keys
from gencoach.errors import ContractError
from gencoach.limits import StageLimits
from gencoach.metrics.exposition import CONTENT_TYPE
from gencoach.protocol import decode_json, parse_event
from gencoach.service.branching.interventions import (
    Intervention,
    InterventionRefused,
    Interventions,
)
from gencoach.service.coaching.budgets import BudgetError, Budgets
from gencoach.service.coaching.lifecycle import MAY_ORDER
from gencoach.service.coaching.requests import RequestStore
from gencoach.service.store.graphstore import GraphStore
from gencoach.service.store.intake import Intake
from gencoach.service.web.apidoc import (
    BUDGETS_BODY,
    EVENTS_BODY,
    INTERVENTION_BODY,
    MAX_BATCH,
    as_served,
    errors,
    write_errors,
)
from gencoach.service.web.bodies import BodyRefusedError, json_body
from gencoach.service.web.methods import answer_allowed_methods
from gencoach.service.web.requestview import request_view
from gencoach.service.web.runquery import (
    AGENT_HELP,
    CURSOR_HELP,
    LIMIT_HELP,
    STATE_HELP,
    run_query,
)
from gencoach.service.writable import REDIS_FULL, write_refusal
from gencoach.settling import Settling


@dataclass
class ApiContext:
    """What the routes work with; built by the controller."""

    client: Redis
    keys: Keys
    store: GraphStore
    intake: Intake
    limits: StageLimits
    requests: RequestStore
    budgets: Budgets
    interventions: Interventions
    token: str | None = None
    metrics: Callable[[], Awaitable[bytes]] | None = None


def _problem(code: int, detail: str, **extra: Any) -> JSONResponse:
    return JSONResponse({"detail": detail, **extra}, status_code=code)


def _unavailable(detail: str) -> JSONResponse:
    """503 for a Redis that is away or full: the client may send the request again soon."""
    response = _problem(503, detail, status="unavailable")
    response.headers["Retry-After"] = "1"
    return response


def create_app(ctx: ApiContext) -> FastAPI:
    """The FastAPI application of one controller."""
    app = FastAPI(title="gencoach", version=__version__, docs_url=None, redoc_url=None)
    answer_allowed_methods(app)
    _document_bodies(app)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(_: Request, error: RequestValidationError) -> JSONResponse:
        """A parameter FastAPI refused: 422 with one sentence, as every other error."""
        found = [
            {"field": ".".join(str(p) for p in item["loc"]), "reason": item["msg"]}
            for item in error.errors()
        ]
        return _problem(422, "invalid request parameters", errors=found)

    @app.exception_handler(redis.exceptions.ConnectionError)
    @app.exception_handler(redis.exceptions.TimeoutError)
    async def redis_unavailable(_: Request, error: Exception) -> JSONResponse:
        """Redis away (restarting, unreachable): 503, and the client may try again."""
        return _unavailable(f"Redis unreachable: {error}")

    @app.exception_handler(redis.exceptions.OutOfMemoryError)
    async def redis_full(_: Request, error: Exception) -> JSONResponse:
        """Redis at its maxmemory refuses the write: 503, and the client sends it again."""
        return _unavailable(f"{REDIS_FULL}; send the request again once it takes writes")

    @app.exception_handler(BodyRefusedError)
    async def body_refused(_: Request, refused: BodyRefusedError) -> JSONResponse:
        """A body that is not JSON (415) or repeats a key (422)."""
        return _problem(refused.status, refused.detail, **refused.extra)

    def authorized(authorization: Annotated[str | None, Header()] = None) -> None:
        if ctx.token is None:
            return
        if authorization is None or not authorization.startswith("Bearer "):
            raise HTTPException(401, "missing bearer token", {"WWW-Authenticate": "Bearer"})
        # Bytes, not str: compare_digest refuses non-ASCII text with a TypeError.
        given = authorization.removeprefix("Bearer ").encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(given, ctx.token.encode()):
            raise HTTPException(403, "invalid bearer token")

    @app.get("/health", responses=errors(503))
    async def health() -> JSONResponse:
        """Ready when Redis answers and takes writes, and intake is reading the stream."""
        try:
            await ctx.client.ping()
        except redis.exceptions.RedisError as error:
            return _problem(503, f"Redis unreachable: {error}", status="unavailable")
        refusal = await write_refusal(ctx.client, ctx.keys)
        if refusal is not None:
            return _problem(503, refusal, status="unavailable")
        if not ctx.intake.running:
            return _problem(503, "intake is not running", status="unavailable")
        return JSONResponse({"status": "ready", "version": __version__})

    @app.get("/metrics", response_class=Response, responses=errors(404, 503))
    async def metrics() -> Response:
        """Prometheus text: every process's counters, and queues, runs and lag measured now."""
        if ctx.metrics is None:
            return _problem(404, "this API has no metrics")
        return Response(await ctx.metrics(), media_type=CONTENT_TYPE)

    @app.post(
        "/v1/events",
        status_code=202,
        dependencies=[Depends(authorized)],
        responses=write_errors(),
        openapi_extra=EVENTS_BODY,
    )
    async def post_events(request: Request) -> JSONResponse:
        """Append a JSON array of events to the events stream, all or none."""
        try:
            batch = decode_json(await json_body(request), "event batch")
        except ContractError as error:
            return _problem(400, f"the body is not valid JSON: {error.violations[0].reason}")
        if not isinstance(batch, list):
            return _problem(400, "the body must be a JSON array of events")
        if len(batch) > MAX_BATCH:
            return _problem(413, f"at most {MAX_BATCH} events per request, got {len(batch)}")
        errors = []
        payloads = []
        for index, item in enumerate(batch):
            payload = json.dumps(item, separators=(",", ":"), ensure_ascii=False)
            payloads.append(payload)
            try:
                event = parse_event(item)
            except ContractError as error:
                fields = [{"field": v.field, "reason": v.reason} for v in error.violations]
                errors.append({"index": index, "message": str(error), "fields": fields})
                continue
            refusal = ctx.intake.refusal(event, len(payload.encode()))
            if refusal is not None:
                field, reason = refusal
                fields = [{"field": field, "reason": reason}]
                errors.append({"index": index, "message": reason, "fields": fields})
        if errors:
            detail = f"{len(errors)} of {len(batch)} events are invalid; none were accepted"
            return _problem(422, detail, errors=errors)
        pipe = ctx.client.pipeline(transaction=False)
        for payload in payloads:
            pipe.xadd(ctx.keys.events, {EVENT_FIELD: payload})
        await pipe.execute()
        return JSONResponse({"accepted": len(batch)}, status_code=202)

    @app.get("/v1/runs", responses=errors(400, 503))
    async def runs(
        state: Annotated[str | None, Query(description=STATE_HELP)] = None,
        scenario: Annotated[str | None, Query(description="Only runs of this scenario.")] = None,
        agent: Annotated[str | None, Query(description=AGENT_HELP)] = None,
        cursor: Annotated[str | None, Query(description=CURSOR_HELP)] = None,
        limit: Annotated[str | None, Query(description=LIMIT_HELP)] = None,
    ) -> JSONResponse:
        """A page of runs (active first, newest first), the total and the counts per state."""
        try:
            query = run_query(state, scenario, agent, cursor, limit)
            page = await ctx.store.index.page(query)
        except ValueError as error:
            return _problem(400, str(error))
        return JSONResponse(
            {
                "runs": [run.to_json() for run in page.runs],
                "total": page.total,
                "counts": page.counts,
                "next_cursor": page.next_cursor,
            }
        )

    @app.get("/v1/runs/{run_id:path}/stages", responses=errors(404, 503))
    async def stages(run_id: str) -> JSONResponse:
        """Per stage: pending, completed, proven, unproven, and the limits in force."""
        if await ctx.store.state(run_id) is None:
            return _problem(404, f"unknown run {run_id!r}")
        budgets = await ctx.limits.stage_budgets(run_id, await ctx.budgets.current())
        return JSONResponse({"run_id": run_id, "stages": [b.model_dump() for b in budgets]})

    @app.get("/v1/runs/{run_id:path}/requests", responses=errors(404, 503))
    async def requests(run_id: str) -> JSONResponse:
        """Every coaching request of the run, with its state, reason and timings."""
        if await ctx.store.state(run_id) is None:
            return _problem(404, f"unknown run {run_id!r}")
        listed = [request_view(request) for request in await ctx.requests.all(run_id)]
        return JSONResponse({"run_id": run_id, "requests": listed})

    @app.post(
        "/v1/runs/{run_id:path}/interventions",
        status_code=202,
        dependencies=[Depends(authorized)],
        responses=write_errors(404, 409),
        openapi_extra=INTERVENTION_BODY,
    )
    async def intervene(run_id: str, request: Request) -> JSONResponse:
        """A person's diagnosis and decision, reinjected at the candidate's input."""
        try:
            intervention = Intervention.parse_json(await json_body(request))
        except ContractError as error:
            fields = [{"field": v.field, "reason": v.reason} for v in error.violations]
            return _problem(422, str(error), errors=fields)
        try:
            accepted = await ctx.interventions.submit(run_id, intervention)
        except InterventionRefused as refused:
            return _problem(refused.status, refused.reason)
        return JSONResponse(request_view(accepted), status_code=202)

    @app.get("/v1/runs/{run_id:path}", responses=errors(404, 503))
    async def run(run_id: str) -> JSONResponse:
        """A run's state, the size of its graph, and whether it is settled: no branch order
        can come for it (through `settled_seq`, the generator's seq it last asked at)."""
        summary = await ctx.store.summary(run_id)
        if summary is None:
            return _problem(404, f"unknown run {run_id!r}")
        settled_seq = await Settling(ctx.client, ctx.keys).answered(run_id)
        if summary["state"] == "active":
            settled = settled_seq is not None
        else:
            settled = not any(r.state in MAY_ORDER for r in await ctx.requests.all(run_id))
        return JSONResponse({**summary, "settled": settled, "settled_seq": settled_seq})

    @app.get("/v1/budgets", responses=errors(503))
    async def budgets() -> JSONResponse:
        """The budgets in force, and which of them were changed over HTTP."""
        return JSONResponse(
            {
                "effective": (await ctx.budgets.current()).model_dump(),
                "overrides": await ctx.budgets.overrides(),
            }
        )

    @app.put(
        "/v1/budgets",
        dependencies=[Depends(authorized)],
        responses=write_errors(),
        openapi_extra=BUDGETS_BODY,
    )
    async def change_budgets(request: Request) -> JSONResponse:
        """Change budgets for every controller from the next admission on."""
        try:
            changes = decode_json(await json_body(request), "budgets")
        except ContractError as error:
            return _problem(400, f"the body is not valid JSON: {error.violations[0].reason}")
        if not isinstance(changes, dict):
            return _problem(400, "the body must be a JSON object of budgets")
        not_integers = {
            key: f"must be a JSON integer, got {type(value).__name__} {value!r}"
            for key, value in changes.items()
            if isinstance(value, bool) or not isinstance(value, int)
        }
        if not_integers:
            return _problem(422, "invalid budgets; nothing was changed", errors=not_integers)
        try:
            limits = await ctx.budgets.change(changes)
        except BudgetError as error:
            return _problem(422, "invalid budgets; nothing was changed", errors=error.problems)
        return JSONResponse({"effective": limits.model_dump()})

    @app.delete("/v1/budgets", dependencies=[Depends(authorized)], responses=errors(401, 403, 503))
    async def reset_budgets() -> JSONResponse:
        """Drop the HTTP changes: the config file's budgets apply again."""
        return JSONResponse({"effective": (await ctx.budgets.reset()).model_dump()})

    return app


def _document_bodies(app: FastAPI) -> None:
    """Make the app's OpenAPI document say what the server does (see `apidoc`)."""
    generate = app.openapi

    def document() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = as_served(generate())
        return app.openapi_schema

    app.openapi = document  # type: ignore[method-assign]
