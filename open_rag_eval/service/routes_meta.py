"""``/healthz`` (the process answers), ``/readyz`` (the database answers and jobs can run), ``/v1/info``."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse

from open_rag_eval._version import __version__
from open_rag_eval.service.deps import engine_of, reader, settings_of
from open_rag_eval.service.keys import Principal
from open_rag_eval.service.problems import problem_response

__all__ = ["router"]

router = APIRouter()


@router.get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz", tags=["health"], responses={503: {"description": "not ready"}})
async def readyz(request: Request) -> Any:
    try:
        async with engine_of(request).connect() as connection:
            await connection.execute(sa.text("SELECT 1"))
    except Exception:
        return problem_response(503, "not_ready", "the database does not answer")
    runner = request.app.state.runner
    return JSONResponse({"status": "ready", "runner": runner is not None})


@router.get("/v1/info", tags=["meta"])
async def info(request: Request, who: Principal = Depends(reader)) -> dict[str, Any]:
    """What this server offers: judge profiles (name and model, never URLs or keys), server-side configs, limits."""
    settings = settings_of(request)
    profiles = [{"name": name, "model": section.get("model", "gpt-4o-mini"),
                 "simulated": section.get("simulated") is not None}
                for name, section in settings.judge_profiles.items()]
    return {
        "version": __version__,
        "tenant": who.tenant,
        "judge_profiles": profiles,
        "default_judge_profile": settings.profile(None),
        "configs": sorted(settings.configs),
        "inline_evaluators": settings.inline_evaluators,
        "limits": settings.limits.model_dump(),
        "database": "sqlite" if settings.sqlite else "postgresql",
        "auth": settings.auth,
    }
