"""The console's JSON routes under `/console/api`: read-only views the pages poll.

Every view answers with an ETag; a poll that sends it back in `If-None-Match` gets
304 and no body while nothing changed. Changes go through the API's own routes
(`PUT`/`DELETE /v1/budgets`, `POST /v1/runs/{id}/interventions`), with its auth rules.
Run and request ids travel as query parameters, so any id (with `/`, `:` or `#`) works.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response

from gencoach.config import Settings
from gencoach.console.depths import QueueDepths
from gencoach.console.funnel import job_stats, route_funnels
from gencoach.console.graphview import branch_of, graph_view, node_view
from gencoach.console.sources import GraphData, GraphSource, LiveSource, remember
from gencoach.metrics.catalog import LLM_CALLS, LLM_TOKENS
from gencoach.metrics.exposition import stored
from gencoach.service.web.api import ApiContext
from gencoach.service.web.apidoc import errors
from gencoach.service.web.requestview import request_view
from gencoach.service.web.runquery import run_query

PREFIX = "/console/api"
RunId = Annotated[str, Query(alias="run", min_length=1)]


def etag_json(request: Request, payload: Any) -> Response:
    """`payload` as JSON with an ETag, or 304 when the client's copy is current."""
    body = json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()
    tag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
    headers = {"ETag": tag, "Cache-Control": "no-cache"}
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _missing(what: str) -> JSONResponse:
    return JSONResponse({"detail": what}, status_code=404)


def bearer_check(token: str | None) -> Any:
    """A dependency enforcing the API's rule: the bearer token when one is configured."""

    def authorized(authorization: Annotated[str | None, Header()] = None) -> None:
        if token is None:
            return
        if authorization is None or not authorization.startswith("Bearer "):
            raise HTTPException(401, "missing bearer token", {"WWW-Authenticate": "Bearer"})
        given = authorization.removeprefix("Bearer ").encode()
        if not hmac.compare_digest(given, token.encode()):
            raise HTTPException(403, "invalid bearer token")

    return authorized


def graph_router(source: GraphSource) -> APIRouter:
    """Routes both consoles serve: the run list, a run's graph, one node in full."""
    router = APIRouter(prefix=PREFIX)
    views: dict[str, tuple[GraphData, dict[str, Any]]] = {}

    @router.get("/runs", responses=errors(400, 503))
    async def runs(
        request: Request,
        state: str | None = None,
        scenario: str | None = None,
        agent: str | None = None,
        cursor: str | None = None,
        limit: str | None = None,
    ) -> Response:
        """A page of runs (active first) matching the filters, the totals, the values to
        filter by, and the cursor of the next page."""
        try:
            query = run_query(state, scenario, agent, cursor, limit)
            payload = await source.run_page(query)
        except ValueError as error:
            return JSONResponse({"detail": str(error)}, status_code=400)
        return etag_json(request, payload)

    @router.get("/graph", responses=errors(404, 503))
    async def graph(request: Request, run_id: RunId) -> Response:
        """The run's tree, compact."""
        data = await source.graph(run_id)
        if data is None:
            return _missing(f"unknown run {run_id!r}")
        cached = views.pop(run_id, None)
        view = cached[1] if cached is not None and cached[0] is data else graph_view(data)
        remember(views, run_id, (data, view))
        return etag_json(request, view)

    @router.get("/node", responses=errors(404, 503))
    async def node(
        request: Request, run_id: RunId, candidate: Annotated[int, Query(ge=0)]
    ) -> Response:
        """One candidate with its situation's input, its requests and their logs."""
        data = await source.graph(run_id)
        if data is None:
            return _missing(f"unknown run {run_id!r}")
        view = node_view(data, candidate, await source.requests(run_id), await source.logs(run_id))
        if view is None:
            return _missing(f"run {run_id} has no candidate {candidate}")
        return etag_json(request, view)

    return router


def live_router(
    ctx: ApiContext, source: LiveSource, settings: Settings, queues: QueueDepths
) -> APIRouter:
    """Routes only a running controller serves: funnel, stages, following a request."""
    router = APIRouter(prefix=PREFIX)

    @router.get(
        "/auth", dependencies=[Depends(bearer_check(ctx.token))], responses=errors(401, 403)
    )
    async def auth() -> JSONResponse:
        """200 when the request carries the token the API wants (or none is set)."""
        return JSONResponse({"authorized": True})

    @router.get("/funnel", responses=errors(503))
    async def funnel(
        request: Request, run_id: Annotated[str | None, Query(alias="run")] = None
    ) -> Response:
        """Per route: seen → skipped → refused → admitted → corrected → executed → proven."""
        run_ids = [run_id] if run_id else await ctx.store.index.run_ids()
        requests = [r for rid in run_ids for r in await ctx.requests.all(rid)]
        jobs = job_stats(requests)
        # Calls and tokens as `/metrics` and `gencoach status` count them: the counters
        # every process flushes to the metrics hash.
        series = await stored(ctx.client, ctx.keys.metrics)
        backends = []
        for index, (name, backend) in enumerate(settings.backends.items()):
            prompt = int(series.get((LLM_TOKENS.name, (name, "prompt")), 0))
            completion = int(series.get((LLM_TOKENS.name, (name, "completion")), 0))
            backends.append(
                {
                    "name": name,
                    "type": backend.type,
                    "model": backend.default_model,
                    "calls": int(series.get((LLM_CALLS.name, (name, "ok")), 0)),
                    "tokens": {
                        "prompt": prompt,
                        "completion": completion,
                        "total": prompt + completion,
                    },
                    # Coaching sends every LLM job to the first backend configured.
                    "jobs": jobs["llm"].to_json() if index == 0 else None,
                }
            )
        payload = {
            "run": run_id,
            "routes": route_funnels(requests),
            "backends": backends,
            "agent": jobs["agent"].to_json(),
            "queues": await queues.read(),
        }
        return etag_json(request, payload)

    @router.get("/stages", responses=errors(503))
    async def stages(request: Request) -> Response:
        """The budgets in force and, per active run and stage, the counts against them."""
        limits = await ctx.budgets.current()
        runs = []
        for run_id in await ctx.store.index.in_state("active"):
            budgets = await ctx.limits.stage_budgets(run_id, limits)
            runs.append({"run_id": run_id, "stages": [b.model_dump() for b in budgets]})
        payload = {
            "budgets": {
                "effective": limits.model_dump(),
                "overrides": await ctx.budgets.overrides(),
            },
            "runs": runs,
        }
        return etag_json(request, payload)

    @router.get("/follow", responses=errors(404, 503))
    async def follow(
        request: Request, run_id: RunId, request_id: Annotated[str, Query(alias="request")]
    ) -> Response:
        """A request's life so far and the coached branch it became."""
        found = await ctx.requests.get(run_id, request_id)
        if found is None:
            return _missing(f"run {run_id} has no request {request_id!r}")
        data = await source.graph(run_id)
        branch = branch_of(data, found) if data is not None else []
        return etag_json(request, {"request": request_view(found), "branch": branch})

    return router
