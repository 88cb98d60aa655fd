"""The committed OpenAPI description matches the app, and a property-based fuzz run (schemathesis) against a live
server finds no request that makes it answer 500."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.service_server import Service

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
schemathesis = pytest.importorskip("schemathesis", reason="schemathesis (dev extra) is not installed")

from hypothesis import HealthCheck, given, settings  # noqa: E402

from open_rag_eval.service.openapi import COMMITTED, current, render  # noqa: E402


EXAMPLES = 15  # per operation: the whole run stays well under a minute


def test_the_committed_openapi_json_is_the_apps_schema() -> None:
    expected = render(current())
    assert COMMITTED.read_text(encoding="utf-8") == expected, (
        "the API changed: if intended, regenerate with "
        "python -m open_rag_eval.service.openapi")


def test_the_schema_names_every_endpoint_and_the_bearer_scheme() -> None:
    schema = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert {"/v1/jobs", "/v1/jobs/{job_id}/events", "/v1/evaluate", "/v1/uploads", "/v1/uploads/{upload_id}",
            "/v1/sweeps/{sweep_id}/runs", "/healthz", "/readyz", "/v1/info"} <= set(schema["paths"])
    assert {"get", "post"} <= set(schema["paths"]["/v1/uploads"])
    assert {"get", "delete"} <= set(schema["paths"]["/v1/uploads/{upload_id}"])
    assert schema["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder: Path = tmp_path_factory.mktemp("fuzz")
    with Service(folder, {"limits": {"max_active_jobs": 1000, "evaluate_wait_s": 1, "max_body_mb": 1},
                          "connector_allow": ["http://127.0.0.1:9/"]}) as running:
        yield running


@pytest.mark.slow
def test_no_generated_request_makes_the_server_fail(live: Service) -> None:
    """Every operation, a bounded number of generated requests each (schemathesis strategies driven by hypothesis
    directly: its pytest plugin does not load under this pytest)."""
    api = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    failures: list[str] = []
    fuzzed: set[str] = set()
    for result in api.get_all_operations():
        operation = result.ok()
        fuzzed.add(f"{operation.method.upper()} {operation.path}")

        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def fuzz(case: Any) -> None:
            response = case.call(base_url=live.url, timeout=30)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} -> {response.status_code}: {response.text[:300]}")

        fuzz()
    assert not failures, "\n".join(failures[:10])
    assert {"POST /v1/uploads", "GET /v1/uploads", "GET /v1/uploads/{upload_id}",
            "DELETE /v1/uploads/{upload_id}", "GET /v1/jobs", "DELETE /v1/jobs/{job_id}"} <= fuzzed
    assert "Traceback" not in live.log.read_text(encoding="utf-8", errors="replace")
