"""The FastAPI application: lifespan (database, migrations, the SQLite lock, the job runner), auth, body limit.

``create_app(settings)`` builds it; ``serve`` runs it with uvicorn. The routes live in ``routes_jobs``,
``routes_uploads``, ``routes_sweeps`` and ``dashboard``; the runner in ``runner``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import Depends, FastAPI, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.exceptions import HTTPException as StarletteHTTPException

from open_rag_eval import __version__
from open_rag_eval.service import problems
from open_rag_eval.service.keys import Principal, verify
from open_rag_eval.service.problems import Problem
from open_rag_eval.service.settings import Settings

__all__ = ["BodyLimit", "create_app", "principal", "reader", "writer"]

log = logging.getLogger(__name__)

COOKIE = "ore_key"
ANONYMOUS = Principal("default", frozenset({"read", "write"}))
BEARER = HTTPBearer(auto_error=False, description="an API key: open-rag-eval serve keys create --tenant NAME")


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
                  redoc_url=None, description="Evaluation jobs over HTTP: the CLI's pipeline, queued in a database.")
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
    return app


def engine_of(request: Request) -> AsyncEngine:
    return request.app.state.engine  # type: ignore[no-any-return]


async def owned_row(request: Request, table: Any, tenant: str, row_id: str) -> dict[str, Any] | None:
    """The row of ``table`` with this id in the tenant, or None: another tenant's row is as absent as a missing one."""
    import sqlalchemy as sa

    async with engine_of(request).connect() as connection:
        row = (await connection.execute(sa.select(table).where(
            table.c.id == row_id, table.c.tenant == tenant))).mappings().first()
    return None if row is None else dict(row)


def settings_of(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


async def principal(request: Request,
                    credentials: HTTPAuthorizationCredentials | None = Depends(BEARER)) -> Principal:
    """Who is asking: anyone on a loopback server without auth; else the tenant of a valid key (Bearer or the
    dashboard's cookie)."""
    if not settings_of(request).auth:
        return ANONYMOUS
    presented = credentials.credentials.strip() if credentials is not None else request.cookies.get(COOKIE, "")
    found = await verify(engine_of(request), presented) if presented else None
    if found is None:
        raise Problem(401, "unauthorized", "send a valid API key: Authorization: Bearer <key>",
                      headers={"WWW-Authenticate": "Bearer"})
    return found


def _scoped(scope: str) -> Callable[[Principal], Awaitable[Principal]]:
    async def check(who: Principal = Depends(principal)) -> Principal:
        if not who.may(scope):
            raise Problem(403, "forbidden", f"this key lacks the '{scope}' scope")
        return who

    return check


reader = _scoped("read")
writer = _scoped("write")


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
