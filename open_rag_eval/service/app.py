"""The FastAPI application: lifespan (database, migrations, the SQLite lock, the job runner), body limit.

``create_app(settings)`` builds it; ``serve`` runs it with uvicorn. The routes live in ``routes_jobs``,
``routes_uploads``, ``routes_sweeps`` and ``dashboard`` (what they depend on, auth included, in ``deps``); the
runner in ``runner``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Depends, FastAPI
from starlette.exceptions import HTTPException as StarletteHTTPException

from open_rag_eval._version import __version__
from open_rag_eval.service import problems
from open_rag_eval.service.deps import known_query
from open_rag_eval.service.settings import Settings

__all__ = ["BodyLimit", "create_app"]

log = logging.getLogger(__name__)


@contextlib.asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    from open_rag_eval.service.storage import Storage

    settings: Settings = app.state.settings
    owned = app.state.storage is None
    storage = await Storage.open(settings) if owned else app.state.storage
    app.state.engine = storage.engine
    runner = None
    if app.state.run_jobs and settings.runner.jobs > 0:
        from open_rag_eval.service.runner import RunnerThread

        runner = app.state.runner = RunnerThread(settings)
        runner.start()
    try:
        yield
    finally:
        if runner is not None:
            await asyncio.to_thread(runner.stop)
        if owned:
            await storage.close()


def create_app(settings: Settings, *, storage: Any = None, run_jobs: bool = True) -> FastAPI:
    """The service; ``storage``: an already opened ``Storage`` (``serve`` opens it first, so a refused SQLite lock
    is one clear line before uvicorn starts), else the app opens and closes its own."""
    app = FastAPI(title="open-rag-eval", version=__version__, lifespan=lifespan, docs_url="/docs",
                  redoc_url=None, description="Evaluation jobs over HTTP: the CLI's pipeline, queued in a database.",
                  dependencies=[Depends(known_query)])
    app.state.settings = settings
    app.state.run_jobs = run_jobs
    app.state.storage = storage
    app.state.runner = None
    problems.install(app)
    from open_rag_eval.service import dashboard, routes_jobs, routes_meta, routes_sweeps, routes_uploads

    app.include_router(routes_meta.router)
    app.include_router(routes_jobs.router)
    app.include_router(routes_uploads.router)
    app.include_router(routes_sweeps.router)
    app.include_router(dashboard.router)
    app.add_middleware(BodyLimit, limit=int(settings.limits.max_body_mb * 1_000_000))
    _complete_openapi(app)
    return app


def _complete_openapi(app: FastAPI) -> None:
    from fastapi.openapi.utils import get_openapi

    from open_rag_eval.service.openapi import complete

    def schema() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = complete(get_openapi(title=app.title, version=app.version,
                                                      description=app.description, routes=app.routes))
        return app.openapi_schema

    app.openapi = schema  # type: ignore[method-assign]


class BodyLimit:
    """Refuse a request body over ``limit`` bytes with 413, by its Content-Length or while it streams."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(scope, receive, send)
            return
        seen = 0
        started = False

        async def counted() -> dict[str, Any]:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise _TooLarge(413, f"the request body is larger than {self.limit} bytes (limits.max_body_mb)")
            return message

        async def tracked(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except _TooLarge:
            if not started:
                await self._refuse(scope, receive, send)

    async def _refuse(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        response = problems.problem_response(413, "payload_too_large",
                                             f"the request body is larger than {self.limit} bytes (limits.max_body_mb)")
        await response(scope, receive, send)


class _TooLarge(StarletteHTTPException):
    """An HTTP error, so that FastAPI's body parsing passes it on as a 413 instead of a generic 400."""
