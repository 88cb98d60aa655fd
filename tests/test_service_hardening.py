"""Every client-controlled value a real server is sent gives a 4xx problem, never a 500: odd ``Last-Event-ID``s, a
long report page name, a lone surrogate in inline input, a connector URL with a tab or an encoded ``..``; a job's
timestamps are monotone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.service_server import Service, wait_status
from tests.test_service_api import TREC, body

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow

ALLOWED = "http://127.0.0.1:9/rag/"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with Service(tmp_path_factory.mktemp("hardening"), {"connector_allow": [ALLOWED],
                                                         "limits": {"max_active_jobs": 50}}) as running:
        yield running


@pytest.fixture(scope="module")
def done(service: Service) -> str:
    client = service.client()
    job_id = client.post("/v1/jobs", json=body()).json()["id"]
    assert wait_status(client, job_id, ("completed",))["status"] == "completed"
    return str(job_id)


def _problem(reply: Any, status: int) -> dict[str, Any]:
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"] == "application/problem+json"
    return reply.json()  # type: ignore[no-any-return]


@pytest.mark.parametrize("value", ["²", "9" * 5000, "12a", "-1", "٣", "7 7", "1" * 19])
def test_an_odd_last_event_id_is_a_422(service: Service, done: str, value: str) -> None:
    reply = service.client().get(f"/v1/jobs/{done}/events", headers={"Last-Event-ID": value.encode("utf-8")})
    assert _problem(reply, 422)["code"] == "invalid_request"


def test_a_valid_last_event_id_resumes(service: Service, done: str) -> None:
    reply = service.client().get(f"/v1/jobs/{done}/events", headers={"Last-Event-ID": "999999999999999999"})
    assert reply.status_code == 200 and reply.text == ""


@pytest.mark.parametrize("name", ["page-" + "0" * 300 + ".html", "page-" + "1" * 5000 + ".html"])
def test_a_long_report_page_name_is_a_404(service: Service, done: str, name: str) -> None:
    reply = service.client().get(f"/v1/jobs/{done}/report-queries/{name}")
    assert reply.status_code in (404, 414), reply.text  # 414: the HTTP server's own limit on the request line
    if reply.status_code == 404:
        assert _problem(reply, 404)["code"] == "not_found"


def test_a_lone_surrogate_in_inline_input_is_a_422_and_queues_nothing(service: Service) -> None:
    client = service.client()
    before = len(client.get("/v1/jobs").json()["jobs"])
    line = '{"query_id": "q1", "query": "x \\ud800", "run": 1, "passages": [], "answer": "a"}\n'
    raw = json.dumps(body()).replace('"data": "', '"data": ' + json.dumps(line)[:-1], 1)
    reply = client.post("/v1/jobs", content=raw.encode(), headers={"content-type": "application/json"})
    problem = _problem(reply, 422)
    assert problem["code"] in ("bad_input", "invalid_request")
    named = client.post("/v1/sweeps", content=b'{"name": "x\\udc80", "config": {}, "queries": "query\\nq\\n"}',
                        headers={"content-type": "application/json"})
    assert named.status_code == 422, named.text
    assert len(client.get("/v1/jobs").json()["jobs"]) == before


@pytest.mark.parametrize("url", [ALLOWED + "q\t", ALLOWED + "%2e%2e/admin", ALLOWED + "%2E%2E/admin",
                                 ALLOWED + "%252e%252e/admin", ALLOWED + "q\n", ALLOWED + "./q"])
def test_a_connector_url_is_decoded_and_normalised_before_the_allow_list(service: Service, url: str) -> None:
    config = {**TREC, "connector": {"type": "http", "options": {"url": url}}}
    reply = service.client().post("/v1/jobs", json={"config": config, "judge_profile": "sim",
                                                     "inputs": {"format": "csv", "data": "query\nwhat?\n"}})
    assert _problem(reply, 422)["path"] == "config.connector.options.url"


def test_timestamps_are_monotone(service: Service, done: str) -> None:
    for job in service.client().get("/v1/jobs").json()["jobs"]:
        if job["started"] is not None:
            assert job["created"] <= job["started"], job
        if job["finished"] is not None:
            assert (job["started"] or job["created"]) <= job["finished"], job
    assert "Traceback" not in service.log.read_text(encoding="utf-8", errors="replace")
