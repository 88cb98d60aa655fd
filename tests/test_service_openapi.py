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
    with Service(folder, {"auth": True, "limits": {"max_active_jobs": 1000, "evaluate_wait_s": 1, "max_body_mb": 1},
                          "connector_allow": ["http://127.0.0.1:9/"]}) as running:
        yield running


# bodies these operations check beyond their schema (a config's meaning, an input file's rows): a schema-valid body
# may still be a 422 naming the field, so schemathesis's "valid data is accepted" check does not apply to them
SEMANTIC_BODIES = {"POST /v1/jobs", "POST /v1/evaluate", "POST /v1/sweeps", "POST /v1/uploads"}


@pytest.mark.slow
def test_no_generated_request_breaks_the_contract(live: Service) -> None:
    """Every operation, a bounded number of generated requests each, valid and invalid ones (schemathesis strategies
    driven by hypothesis directly: its pytest plugin does not load under this pytest); every response is checked by
    every schemathesis check: no 5xx, every status and content type documented, bodies as the schema says, invalid
    requests refused, valid ones accepted (except SEMANTIC_BODIES), auth enforced."""
    from schemathesis import GenerationMode
    from schemathesis.checks import CHECKS
    from schemathesis.specs.openapi import checks as _registers  # noqa: F401  (the OpenAPI checks)

    key = live.new_key("fuzz")
    auth = {"Authorization": f"Bearer {key}"}
    api = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    semantic = [check for check in CHECKS.get_all() if check.__name__ == "positive_data_acceptance"]
    assert semantic, "schemathesis renamed its positive_data_acceptance check"
    failures: list[str] = []
    fuzzed: set[str] = set()
    for result in api.get_all_operations():
        operation = result.ok()
        name = f"{operation.method.upper()} {operation.path}"
        fuzzed.add(name)
        excluded = semantic if name in SEMANTIC_BODIES else []
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(case=operation.as_strategy(generation_mode=mode))
            def fuzz(case: Any) -> None:
                response = case.call(base_url=live.url, timeout=30, headers=auth)
                try:
                    case.validate_response(response, headers=auth, excluded_checks=excluded)
                except BaseException as error:  # schemathesis's FailureGroup: one line per failure
                    if isinstance(error, KeyboardInterrupt):
                        raise
                    failures.append(f"{name} ({mode.value}) -> {response.status_code}: {str(error)[:400]}")

            try:
                fuzz()
            except BaseException as error:  # an operation with no valid (or no invalid) request to generate
                if type(error).__name__ != "Unsatisfiable":
                    raise
    assert not failures, f"{len(failures)} contract failures:\n" + "\n".join(failures[:10])
    assert {"POST /v1/uploads", "GET /v1/uploads", "GET /v1/uploads/{upload_id}", "GET /v1/usage",
            "DELETE /v1/uploads/{upload_id}", "GET /v1/jobs", "DELETE /v1/jobs/{job_id}"} <= fuzzed
    assert "Traceback" not in live.log.read_text(encoding="utf-8", errors="replace")


def test_every_operation_documents_its_errors_as_problems() -> None:
    schema = json.loads(COMMITTED.read_text(encoding="utf-8"))
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            statuses = set(operation["responses"])
            assert "500" in statuses, (method, path)
            if path.startswith("/v1/"):
                assert {"401", "403", "422"} <= statuses, (method, path)
            for status, response in operation["responses"].items():
                if status >= "400":
                    assert list(response["content"]) == ["application/problem+json"], (method, path, status)
