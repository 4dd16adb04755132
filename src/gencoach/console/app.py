"""Mounting the console: on the controller's API (live), or as its own app over saves."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles

from gencoach.__about__ import __version__
from gencoach.config import Settings
from gencoach.console.depths import QueueDepths
from gencoach.console.routes import PREFIX, graph_router, live_router
from gencoach.console.sources import LiveSource, SavedSource
from gencoach.service.web.api import ApiContext

STATIC_PACKAGE = ("gencoach.console", "static")


def _index() -> str:
    return resources.files("gencoach.console").joinpath("static/index.html").read_text()


def _add_pages(app: FastAPI, mode: str, token_required: bool) -> None:
    app.mount("/console/static", StaticFiles(packages=[STATIC_PACKAGE]), name="console-static")
    page = _index()

    @app.get("/", include_in_schema=False)
    async def index() -> HTMLResponse:
        """The console's single page."""
        return HTMLResponse(page, headers={"Cache-Control": "no-cache"})

    @app.get(f"{PREFIX}/session", include_in_schema=False)
    async def session() -> JSONResponse:
        """What the page needs first: live or saves, and whether changes need a token."""
        return JSONResponse(
            {"mode": mode, "token_required": token_required, "version": __version__}
        )


def mount_live_console(app: FastAPI, ctx: ApiContext, settings: Settings, redis_url: str) -> None:
    """Serve the console at `/` of a controller's API."""
    source = LiveSource(ctx.store, ctx.requests)
    queues = QueueDepths(redis_url, settings.workers.queues)
    app.include_router(live_router(ctx, source, settings, queues))
    app.include_router(graph_router(source))
    _add_pages(app, "live", ctx.token is not None)


def create_saves_app(root: Path) -> FastAPI:
    """A read-only console over the save folders at or below `root`; no Redis needed."""
    app = FastAPI(title="gencoach console", version=__version__, docs_url=None, redoc_url=None)
    app.include_router(graph_router(SavedSource(root)))
    _add_pages(app, "saves", token_required=False)
    return app
