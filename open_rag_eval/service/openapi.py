"""The service's OpenAPI description, as committed in ``openapi.json`` beside this module.

Regenerate after an intended API change: ``python -m open_rag_eval.service.openapi`` (rewrites ``openapi.json``; a
test fails while the committed file and the app disagree).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["COMMITTED", "complete", "current", "render"]

COMMITTED = Path(__file__).with_name("openapi.json")

PROBLEM = {"type": "object", "description": "An error (RFC 9457) with a stable code clients can switch on",
           "properties": {"type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
                          "code": {"type": "string"}, "detail": {"type": "string"}},
           "required": ["type", "title", "status", "code"], "additionalProperties": True}
WHY = {400: "the request could not be read", 401: "no valid API key", 403: "the key lacks the scope",
       404: "no such resource of this tenant", 409: "the resource's state does not allow it",
       413: "the body is larger than limits.max_body_mb", 422: "invalid parameters, config or input",
       429: "a quota is full (Retry-After)", 500: "the server failed unexpectedly", 503: "not ready"}


def _statuses(path: str, method: str, operation: dict[str, Any]) -> list[int]:
    """The error statuses an operation can answer with."""
    statuses = [500]
    if path.startswith("/v1/"):
        statuses += [401, 403, 422]
    if operation.get("security"):  # a key is asked (e.g. /metrics)
        statuses += [401, 403]
    if "{" in path:
        statuses += [404, 409]
    if method in ("post", "put", "patch") or "requestBody" in operation:
        statuses += [400, 413, 422, 429]
    if path == "/readyz":
        statuses.append(503)
    return sorted(set(statuses))


def complete(schema: dict[str, Any]) -> dict[str, Any]:
    """Every operation lists each error status it can answer, as ``application/problem+json``."""
    schema.setdefault("components", {}).setdefault("schemas", {})["Problem"] = PROBLEM
    problem = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            for status in _statuses(path, method, operation):
                responses[str(status)] = {"description": WHY[status], "content": problem}
    for name in ("HTTPValidationError", "ValidationError"):  # FastAPI's own 422 body: ours is a problem
        schema["components"]["schemas"].pop(name, None)
    return schema


def current() -> dict[str, Any]:
    """The schema the app serves, without its version number (a release is not an API change)."""
    from open_rag_eval.service.app import create_app
    from open_rag_eval.service.settings import Settings

    schema = create_app(Settings()).openapi()
    schema["info"].pop("version", None)
    return schema


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    COMMITTED.write_text(render(current()), encoding="utf-8")
