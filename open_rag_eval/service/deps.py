"""What every route depends on: the request's engine and settings, who is asking (an API key's tenant and scopes)
and the tenant's own rows. The app (``app.create_app``) includes the routes; the routes import this module."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncEngine

from open_rag_eval.service.keys import Principal, verify
from open_rag_eval.service.problems import Problem
from open_rag_eval.service.settings import Settings

__all__ = ["ANONYMOUS", "BEARER", "COOKIE", "engine_of", "owned_row", "principal", "metrics_reader", "reader", "settings_of", "writer"]

COOKIE = "ore_key"
ANONYMOUS = Principal("default", frozenset({"read", "write", "metrics"}))
BEARER = HTTPBearer(auto_error=False, description="an API key: open-rag-eval serve keys create --tenant NAME")


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
metrics_reader = _scoped("metrics")


async def known_query(request: Request) -> None:
    """A query parameter the operation does not declare is a 422, never silently ignored (a typo such as
    ``?limt=5`` would otherwise answer as if it were not there)."""
    dependant = getattr(request.scope.get("route"), "dependant", None)
    if dependant is None or not request.query_params:
        return
    allowed = _query_names(dependant)
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise Problem(422, "invalid_request", f"unknown query parameter {unknown[0]!r}; this operation takes: "
                      f"{', '.join(sorted(allowed)) or 'none'}")


def _query_names(dependant: Any) -> set[str]:
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _query_names(sub)
    return names

