"""Errors as ``application/problem+json`` (RFC 9457) with a stable ``code`` clients can switch on.

Codes: ``unauthorized`` 401, ``forbidden`` 403 (the key lacks a scope), ``not_found`` 404 (also for another
tenant's resources), ``job_active`` / ``not_ready`` 409, ``payload_too_large`` 413, ``invalid_request`` /
``bad_config`` / ``bad_input`` / ``idempotency_key_reused`` 422, ``quota_jobs`` / ``quota_outputs`` / ``quota_uploads`` 429,
``internal`` 500, ``not_ready`` 503 (``/readyz``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from open_rag_eval.core.errors import ConfigError, InputError, OpenRagEvalError

__all__ = ["MEDIA", "Problem", "install", "problem_response"]

log = logging.getLogger(__name__)

MEDIA = "application/problem+json"
_TITLES = {400: "Bad request", 401: "Unauthorized", 403: "Forbidden", 404: "Not found", 405: "Method not allowed",
           409: "Conflict", 413: "Payload too large", 415: "Unsupported media type", 422: "Unprocessable content",
           429: "Too many requests", 500: "Internal server error", 503: "Service unavailable"}
_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
          409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type", 422: "invalid_request",
          429: "too_many_requests", 500: "internal", 503: "not_ready"}


class Problem(Exception):
    def __init__(self, status: int, code: str, detail: str = "", *, headers: dict[str, str] | None = None,
                 **extra: Any) -> None:
        super().__init__(detail or code)
        self.status, self.code, self.detail, self.headers, self.extra = status, code, detail, headers or {}, extra


def problem_response(status: int, code: str, detail: str = "", headers: dict[str, str] | None = None,
                     **extra: Any) -> JSONResponse:
    body = {"type": f"about:blank#{code}", "title": _TITLES.get(status, "Error"), "status": status, "code": code,
            **({"detail": detail} if detail else {}), **extra}
    return JSONResponse(body, status_code=status, media_type=MEDIA, headers=headers)


def from_error(error: OpenRagEvalError, hide: Sequence[str | Path] = ()) -> Problem:
    """A library error (bad config or input) as a 422 naming the field, file and line -- never a server path."""
    from open_rag_eval.core.redaction import redact

    from open_rag_eval.service.paths import relative_text

    text = relative_text(redact(str(error)), hide)
    if isinstance(error, ConfigError):
        return Problem(422, "bad_config", text, path=error.path or None)
    if isinstance(error, InputError):
        status = int(getattr(error, "status", 422))
        return Problem(status, "payload_too_large" if status == 413 else "bad_input", text, field=error.field or None,
                       line=error.line)
    return Problem(422, "invalid_request", text)


def install(app: Any) -> None:
    @app.exception_handler(Problem)
    async def _problem(_request: Request, error: Problem) -> JSONResponse:
        extra = {key: value for key, value in error.extra.items() if value is not None}
        return problem_response(error.status, error.code, error.detail, error.headers, **extra)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, error: RequestValidationError) -> JSONResponse:
        errors = [{"loc": [str(part) for part in item.get("loc", ())], "msg": str(item.get("msg", ""))}
                  for item in error.errors()[:20]]
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        return problem_response(422, "invalid_request", f"{'.'.join(first['loc'])}: {first['msg']}", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_request: Request, error: StarletteHTTPException) -> JSONResponse:
        return problem_response(error.status_code, _CODES.get(error.status_code, "error"),
                                str(error.detail) if error.detail else "", dict(error.headers or {}))

    @app.exception_handler(UnicodeEncodeError)
    async def _surrogate(_request: Request, _error: UnicodeEncodeError) -> JSONResponse:
        return problem_response(422, "invalid_request", "the request holds text that is not valid Unicode (a lone "
                                "surrogate such as \\ud800): send UTF-8 text")

    @app.exception_handler(Exception)
    async def _crash(_request: Request, error: Exception) -> JSONResponse:
        log.error("request failed unexpectedly", exc_info=error)
        return problem_response(500, "internal", "the server failed unexpectedly; see its log")
