"""Which methods a path allows, answered for OPTIONS and on a 405, from every route.

Starlette answers OPTIONS or a wrong method from the first route whose path matches,
so `/v1/budgets` (three routes: GET, PUT, DELETE) would claim `Allow: GET`. Here the
`Allow` header lists the methods of every route of the path.
"""

from __future__ import annotations

import re

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route


def allowed_methods(app: FastAPI, path: str) -> set[str]:
    """The methods of the routes matching `path` most closely (with OPTIONS, if any).

    A run id may hold `/`, so `/v1/runs/r/interventions` also matches the run's own
    route (a run named `r/interventions`); the route whose template spells out more of
    the path is the one the path names.
    """
    matching: dict[int, set[str]] = {}
    for route in app.routes:
        if isinstance(route, Route) and route.methods and route.path_regex.match(path):
            methods = route.methods - {"OPTIONS"}  # not the catch-all OPTIONS route itself
            if methods:
                spelled = len(re.sub(r"\{[^}]*\}", "", route.path))
                matching.setdefault(spelled, set()).update(methods)
    if not matching:
        return set()
    return matching[max(matching)] | {"OPTIONS"}


def _allow(methods: set[str]) -> str:
    return ", ".join(sorted(methods))


def answer_allowed_methods(app: FastAPI) -> None:
    """Answer OPTIONS on any route's path with its methods, and a 405 with the same."""

    @app.options("/{path:path}", include_in_schema=False)
    async def options(request: Request) -> Response:
        methods = allowed_methods(app, request.scope["path"])
        if not methods:
            return JSONResponse({"detail": "Not Found"}, status_code=404)
        return Response(status_code=204, headers={"Allow": _allow(methods)})

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, error: StarletteHTTPException) -> Response:
        headers = dict(error.headers or {})
        if error.status_code == 405:
            headers["Allow"] = _allow(allowed_methods(app, request.scope["path"]))
        return JSONResponse(
            {"detail": error.detail}, status_code=error.status_code, headers=headers
        )
