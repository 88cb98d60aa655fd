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
    limits = {"max_active_jobs": 50, "max_columns": 40, "max_line_mb": 0.2, "max_uploads": 3,
              "max_upload_mb_total": 30, "max_body_mb": 40}
    with Service(tmp_path_factory.mktemp("hardening"), {"connector_allow": [ALLOWED], "limits": limits}) as running:
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
                                 ALLOWED + "%252e%252e/admin", ALLOWED + "q\n", ALLOWED + "./q", ALLOWED + "..;/admin",
                                 ALLOWED + ".;/q", ALLOWED + "..\\admin", ALLOWED + "q;x=1", ALLOWED + "%2e./admin",
                                 ALLOWED + "..%2fadmin", ALLOWED + "..%5cadmin", ALLOWED + "q//x"])
def test_a_connector_url_is_decoded_and_normalised_before_the_allow_list(service: Service, url: str) -> None:
    config = {**TREC, "connector": {"type": "http", "options": {"url": url}}}
    reply = service.client().post("/v1/jobs", json={"config": config, "judge_profile": "sim",
                                                     "inputs": {"format": "csv", "data": "query\nwhat?\n"}})
    assert _problem(reply, 422)["path"] == "config.connector.options.url"
    swept = {**config, "connector": {"type": "http", "repeats": 3, "options": {"url": url}}}
    sweep = service.client().post("/v1/sweeps", json={"name": "s", "config": swept, "queries": "query\nwhat?\n"})
    assert _problem(sweep, 422)["path"] == "config.connector.options.url"


def test_timestamps_are_monotone(service: Service, done: str) -> None:
    for job in service.client().get("/v1/jobs").json()["jobs"]:
        if job["started"] is not None:
            assert job["created"] <= job["started"], job
        if job["finished"] is not None:
            assert (job["started"] or job["created"]) <= job["finished"], job
    assert "Traceback" not in service.log.read_text(encoding="utf-8", errors="replace")


CSV_HEADER = "query_id,query,passage_id,passage,generated_answer"


@pytest.mark.parametrize(("columns", "status"), [(41, 422), (5_000, 422), (200_000, 413)])
def test_a_csv_with_too_many_columns_is_refused_at_once_naming_line_1(service: Service, columns: int,
                                                                       status: int) -> None:
    wide = ",".join(f"c{i}" for i in range(columns)) + "\n" + ",".join("x" for _ in range(columns)) + "\n"
    inline = service.client().post("/v1/jobs", json={**body(), "inputs": {"format": "csv", "data": wide}})
    problem = _problem(inline, status)  # 413: its header alone is longer than limits.max_line_mb
    assert problem["line"] == 1 and problem["field"] == "inputs.data"
    assert f"{columns:,} columns" in problem["detail"] if status == 422 else "longer than" in problem["detail"]
    assert problem["detail"].startswith("input.csv:1:")  # the job's own file, named relatively
    uploaded = service.client().post("/v1/uploads", params={"format": "csv"}, content=wide.encode())
    assert _problem(uploaded, status)["field"] == "body"
    assert service.client().get("/v1/uploads").json()["uploads"] == []  # nothing kept


def test_a_line_longer_than_the_bound_is_a_413(service: Service) -> None:
    long = json.dumps({"query_id": "q1", "query": "x" * 300_000, "run": 1, "passages": [], "answer": "a"}) + "\n"
    reply = service.client().post("/v1/uploads", params={"format": "jsonl"}, content=long.encode())
    problem = _problem(reply, 413)
    assert problem["code"] == "payload_too_large" and problem["line"] == 1


def test_a_schema_violating_upload_is_refused(service: Service) -> None:
    for content, fmt in ((b"[1, 2]", "jsonl"), (b"", "jsonl"), (b"{}", "csv")):
        reply = service.client().post("/v1/uploads", params={"format": fmt}, content=content)
        assert _problem(reply, 422)["code"] == "bad_input", (content, fmt)


def test_uploads_are_counted_per_tenant_and_the_loop_answers_while_one_is_read(service: Service) -> None:
    import threading
    import time

    from tests.test_service_api import outputs_jsonl

    client = service.client()
    big = outputs_jsonl(20_000).encode()  # a valid upload the server reads for a while
    answered: list[float] = []
    span: list[float] = []

    def upload() -> None:
        span.append(time.monotonic())
        reply = service.client().post("/v1/uploads", params={"format": "jsonl"}, content=big)
        span.append(time.monotonic())
        assert reply.status_code == 201, reply.text

    worker = threading.Thread(target=upload)
    worker.start()
    while worker.is_alive():
        if client.get("/healthz").status_code == 200:
            answered.append(time.monotonic())
    worker.join()
    assert len(span) == 2 and any(span[0] < t < span[1] for t in answered)  # answered while the upload was read
    for _ in range(2):
        assert client.post("/v1/uploads", params={"format": "jsonl"}, content=body()["inputs"]["data"].encode()
                           ).status_code == 201
    over = client.post("/v1/uploads", params={"format": "jsonl"}, content=body()["inputs"]["data"].encode())
    assert _problem(over, 429)["code"] == "quota_uploads"
    assert len(client.get("/v1/uploads").json()["uploads"]) == 3
