"""The service over real HTTP: a ``serve`` process on loopback with the simulated judge.

Submit -> events -> results equal the CLI's files for the same config and input; idempotency; the client-config
guard (no judge, no environment, no code, allow-listed connectors); 413; problem+json; a second server on one
SQLite file refused; a non-loopback host without auth refused.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.service_server import Service, as_served, sse_events, wait_status

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow

TREC = {"evaluators": [{"type": "trec", "metrics": ["umbrela", "nuggets", "citation", "no_answer"]}]}
DATA = Path(__file__).parent / "data"


def outputs_jsonl(n: int, passages: int = 3) -> str:
    """``n`` small RAG outputs (one run each) as JSONL text."""
    lines = []
    for i in range(n):
        docs = [{"id": f"d{j}", "text": f"Fact {j} about topic {i}: it is studied widely."} for j in range(passages)]
        answer = [{"text": f"Topic {i} is studied widely.", "citations": ["d0"]},
                  {"text": f"Fact {i} matters.", "citations": ["d1"]}]
        lines.append(json.dumps({"query_id": f"q{i}", "query": f"What about topic {i}?", "run": 1,
                                 "passages": docs, "answer": answer}))
    return "\n".join(lines) + "\n"


def body(data: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"config": TREC, "inputs": {"format": "jsonl", "data": data or (DATA / "outputs.jsonl").read_text()},
            "judge_profile": "sim", **extra}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder = tmp_path_factory.mktemp("service")
    (folder / "named.yaml").write_text("evaluators:\n  - type: trec\n    metrics: [umbrela]\n")
    with Service(folder, {"connector_allow": ["http://127.0.0.1:9/allowed/"], "configs": {"umbrela-only": "named.yaml"},
                          "limits": {"max_body_mb": 0.2, "max_active_jobs": 50}}) as running:
        yield running


def test_submit_watch_fetch_equals_the_cli(service: Service, tmp_path: Path) -> None:
    client = service.client()
    created = client.post("/v1/jobs", json=body())
    assert created.status_code == 202, created.text
    job_id = created.json()["id"]
    assert created.headers["location"] == f"/v1/jobs/{job_id}"

    events = sse_events(client, f"/v1/jobs/{job_id}/events")
    statuses = [e["data"]["status"] for e in events if e["event"] == "status"]
    assert statuses[0] == "queued" and statuses[1] == "running" and statuses[-1] == "completed"
    assert [e["id"] for e in events] == sorted({e["id"] for e in events})
    progress = [e["data"] for e in events if e["event"] == "progress"]
    assert progress[-1]["done"]["trec"] == 3 and progress[-1]["outputs_total"] == 3
    resumed = sse_events(client, f"/v1/jobs/{job_id}/events", last_event_id=str(events[1]["id"]))
    assert [e["id"] for e in resumed] == [e["id"] for e in events[2:]]

    job = client.get(f"/v1/jobs/{job_id}").json()
    assert job["status"] == "completed" and job["usage"]["calls"] > 0 and job["n_outputs"] == 3
    got = {name: client.get(f"/v1/jobs/{job_id}/{path}") for name, path in (
        ("results.csv", "results?format=csv"), ("results.json", "results?format=json"),
        ("summary.csv", "summary"), ("manifest.json", "manifest"), ("report.html", "report"))}
    assert all(r.status_code == 200 for r in got.values())
    assert got["report.html"].headers["content-type"].startswith("text/html")
    lines = client.get(f"/v1/jobs/{job_id}/results", params={"format": "jsonl"}).text.splitlines()
    assert [json.loads(line) for line in lines] == json.loads(got["results.json"].content)["outputs"]

    cli = tmp_path / "cli"  # the CLI on the job's config file, into a folder of its own
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config",
                           str(service.job_dir(job_id) / "job.yaml"), "--output-dir", str(cli)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    for name in ("results.csv", "results.json", "summary.csv"):
        assert got[name].content == as_served(cli / name, service.job_dir(job_id)), name


def test_idempotency_key_same_body_same_job_other_body_422(service: Service) -> None:
    client = service.client()
    first = client.post("/v1/jobs", json=body(), headers={"Idempotency-Key": "nightly-1"})
    again = client.post("/v1/jobs", json=body(), headers={"Idempotency-Key": "nightly-1"})
    assert first.status_code == again.status_code == 202
    assert first.json()["id"] == again.json()["id"]
    other = client.post("/v1/jobs", json=body(limit=1), headers={"Idempotency-Key": "nightly-1"})
    assert other.status_code == 422
    assert other.headers["content-type"] == "application/problem+json"
    assert other.json()["code"] == "idempotency_key_reused"
    fresh = client.post("/v1/jobs", json=body(), headers={"Idempotency-Key": "nightly-2"})
    assert fresh.json()["id"] != first.json()["id"]
    wait_status(client, first.json()["id"], ("completed",))


@pytest.mark.parametrize(("config", "path"), [
    ({**TREC, "judge": {"base_url": "http://127.0.0.1:1/v1"}}, "config.judge"),
    ({**TREC, "input": "/etc/passwd"}, "config.input"),
    ({"evaluators": [{"type": "tests.plain_evaluator:PlainEvaluator"}]}, "config.evaluators[0].type"),
    ({"evaluators": [{"type": "trec", "metrics": ["${HOME}"]}]}, "config.evaluators[0].metrics[0]"),
    ({**TREC, "connector": {"type": "http", "options": {"url": "http://169.254.169.254/latest"}}},
     "config.connector.options.url"),
    ({**TREC, "connector": {"type": "http", "options": {"url": "http://127.0.0.1:9/allowed/q",
                                                          "secret_headers": {"X": {"env": "HOME"}}}}},
     "config.connector.options.secret_headers"),
    ({**TREC, "connector": {"type": "tests.rag_frameworks:Anything", "options": {}}}, "config.connector.type"),
])
def test_a_client_config_cannot_reach_the_judge_the_environment_files_or_code(service: Service,
                                                                               config: dict[str, Any],
                                                                               path: str) -> None:
    reply = service.client().post("/v1/jobs", json={**body(), "config": config})
    assert reply.status_code == 422, reply.text
    assert reply.headers["content-type"] == "application/problem+json"
    assert reply.json()["code"] == "bad_config" and reply.json()["path"] == path


def test_bad_input_is_422_naming_line_and_field_and_queues_nothing(service: Service) -> None:
    client = service.client()
    before = len(client.get("/v1/jobs").json()["jobs"])
    bad = '{"query_id": "q1", "query": "x", "run": 1, "passages": [], "answer": "a"}\n{"query_id": \n'
    reply = client.post("/v1/jobs", json=body(bad))
    assert reply.status_code == 422
    problem = reply.json()
    assert problem["code"] == "bad_input" and problem["line"] == 2
    assert str(service.folder) not in reply.text  # no server path
    assert len(client.get("/v1/jobs").json()["jobs"]) == before
    unknown = client.post("/v1/jobs", json={**body(), "judge_profile": "gpt-5-with-my-key"})
    assert unknown.status_code == 422 and unknown.json()["code"] == "bad_config"
    assert "sim" in unknown.json()["detail"]


def test_body_over_the_limit_is_413_whether_declared_or_streamed(service: Service) -> None:
    client = service.client()
    big = outputs_jsonl(600)
    assert len(big) > 200_000
    declared = client.post("/v1/jobs", json=body(big))
    assert declared.status_code == 413
    assert declared.json()["code"] == "payload_too_large"

    def chunks() -> Any:
        for _ in range(30):
            yield b"x" * 10_000

    streamed = client.post("/v1/uploads", params={"format": "jsonl"}, content=chunks())
    assert streamed.status_code == 413 and streamed.json()["code"] == "payload_too_large"


def test_upload_then_job_by_upload_id(service: Service) -> None:
    client = service.client()
    uploaded = client.post("/v1/uploads", params={"format": "jsonl"}, content=(DATA / "outputs.jsonl").read_bytes())
    assert uploaded.status_code == 201
    reply = client.post("/v1/jobs", json={"config": TREC, "upload_id": uploaded.json()["id"], "judge_profile": "sim"})
    assert reply.status_code == 202, reply.text
    assert wait_status(client, reply.json()["id"], ("completed", "failed"))["status"] == "completed"
    missing = client.post("/v1/jobs", json={"config": TREC, "upload_id": "0123456789abcdef"})
    assert missing.status_code == 422 and missing.json()["code"] == "bad_input"


def test_evaluate_answers_in_the_request_when_quick(service: Service) -> None:
    reply = service.client().post("/v1/evaluate", json=body(), params={"wait_s": 120})
    assert reply.status_code == 200, reply.text
    answer = reply.json()
    assert answer["status"] == "completed"
    assert [o["query_id"] for o in answer["results"]["outputs"]] == ["q1", "q1", "7"]
    later = service.client().post("/v1/evaluate", json=body(outputs_jsonl(5)), params={"wait_s": 0})
    assert later.status_code == 202 and later.headers["location"] == f"/v1/jobs/{later.json()['id']}"
    assert wait_status(service.client(), later.json()["id"], ("completed",))["n_outputs"] == 5


def test_results_before_completion_unknown_job_and_delete(service: Service) -> None:
    client = service.client()
    assert client.get("/v1/jobs/nope").json()["code"] == "not_found"
    assert client.get("/v1/jobs/nope").status_code == 404
    job_id = client.post("/v1/jobs", json=body()).json()["id"]
    wait_status(client, job_id, ("completed",))
    assert client.delete(f"/v1/jobs/{job_id}").status_code == 204
    assert client.get(f"/v1/jobs/{job_id}").status_code == 404
    assert not service.job_dir(job_id).exists()


def test_health_ready_info_name_profiles_never_urls_or_keys(service: Service) -> None:
    client = service.client()
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get("/readyz").json()["status"] == "ready"
    info = client.get("/v1/info").json()
    assert info["judge_profiles"] == [{"name": "sim", "model": "simulated-judge", "simulated": True}]
    assert "base_url" not in json.dumps(info) and "api_key" not in json.dumps(info)


def test_a_second_server_on_the_same_sqlite_file_is_refused(service: Service) -> None:
    second = subprocess.run(service.command("serve", "--config", str(service.config), "--port", "0"),
                            capture_output=True, text=True, timeout=120)
    assert second.returncode == 5
    assert "another open-rag-eval server (pid" in second.stderr and "PostgreSQL" in second.stderr


def test_a_non_loopback_host_without_auth_is_refused(tmp_path: Path) -> None:
    service = Service(tmp_path)
    done = subprocess.run(service.command("serve", "--config", str(service.config), "--host", "0.0.0.0"),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0 without authentication" in done.stderr


def test_a_job_may_name_a_server_side_config(service: Service) -> None:
    client = service.client()
    named = {"config_name": "umbrela-only", "inputs": body()["inputs"], "judge_profile": "sim"}
    job = wait_status(client, client.post("/v1/jobs", json=named).json()["id"], ("completed", "failed"))
    assert job["status"] == "completed", job["error"]
    header = client.get(f"/v1/jobs/{job['id']}/results", params={"format": "csv"}).text.splitlines()[0]
    assert "umbrela.mean" in header and "citation" not in header
    unknown = client.post("/v1/jobs", json={**named, "config_name": "nope"})
    assert unknown.status_code == 422 and "umbrela-only" in unknown.json()["detail"]
    both = client.post("/v1/jobs", json={**named, "config": TREC})
    assert both.status_code == 422 and both.json()["path"] == "config_name"


def test_a_job_with_labels_gains_the_corrected_columns_and_bad_labels_are_422(service: Service) -> None:
    client = service.client()
    qrels = "".join(f"q{i} 0 d{j} {(i + j) % 4}\n" for i in range(3) for j in range(3))  # q3 unlabelled
    created = client.post("/v1/jobs", json=body(outputs_jsonl(4), labels=[{"data": qrels}]))
    assert created.status_code == 202, created.text
    job = wait_status(client, created.json()["id"], ("completed", "failed"))
    assert job["status"] == "completed", job["error"]
    rows = {r["metric"]: r for r in csv.DictReader(io.StringIO(client.get(f"/v1/jobs/{job['id']}/summary").text))}
    mean = rows["umbrela.mean"]
    # the people's grades: q0 (0, 1, 2) mean 1, q1 (1, 2, 3) 2, q2 (2, 3, 0) 5/3: people-only mean 14/9
    assert float(mean["people_mean"]) == pytest.approx(14 / 9, abs=1e-6)
    assert (mean["n_labelled"], mean["n_unlabelled"]) == ("3", "1") and mean["corrected_mean"] != ""
    bad = client.post("/v1/jobs", json=body(outputs_jsonl(4), labels=[{"data": "q0 0 d0 9\n"}]))
    assert bad.status_code == 422 and bad.json()["code"] == "bad_input" and "not an UMBRELA grade" in bad.text
    assert str(service.folder) not in bad.text
    named = client.post("/v1/jobs", json=body(config={**TREC, "labels": ["/etc/passwd"]}))
    assert named.status_code == 422 and "/etc/passwd" not in named.text  # a client never names a server file


def test_jobs_are_listed_newest_first_and_paged(service: Service) -> None:
    client = service.client()
    for _ in range(4):
        assert client.post("/v1/jobs", json=body(outputs_jsonl(1))).status_code == 202
    everything = client.get("/v1/jobs", params={"limit": 1000}).json()
    assert everything["next_before"] is None and len(everything["jobs"]) >= 4
    paged, before = [], None
    while True:
        page = client.get("/v1/jobs", params={"limit": 3, **({"before": before} if before else {})}).json()
        assert len(page["jobs"]) <= 3
        paged += page["jobs"]
        before = page["next_before"]
        if before is None:
            break
    assert [job["id"] for job in paged] == [job["id"] for job in everything["jobs"]]
    created = [job["created"] for job in paged]
    assert created == sorted(created, reverse=True)
