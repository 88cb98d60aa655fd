"""The service's security over real HTTP: API keys and scopes, tenant isolation (404, cached judgments included),
quotas (429 + Retry-After), cancel keeping what was judged, and no secret in any response or log."""

from __future__ import annotations

import json
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
from tests.service_server import Service, sse_events, wait_for, wait_status
from tests.test_service_api import TREC, body, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow

JUDGE_KEY = "sk-sim-made-up-judge-key-7f3a9c2e41"  # made up: the external simulated judge's key


@pytest.fixture(scope="module")
def judge() -> Any:
    server = SimulatedJudgeServer(SimulatedServerConfig(api_key=JUDGE_KEY, latency_ms=1))
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, judge: str) -> Any:
    folder = tmp_path_factory.mktemp("secure")
    profiles = {"sim": {"model": "simulated-judge", "simulated": {"latency_ms": 1}},
                "slow": {"model": "simulated-judge", "simulated": {"latency_ms": 150}, "max_concurrency": 2},
                "keyed": {"model": "simulated-judge", "base_url": judge, "api_key_env": "SIM_JUDGE_KEY"},
                "unset": {"model": "gpt-4o-mini", "base_url": "https://judge.example.invalid/v1",
                          "api_key_env": "OPEN_RAG_EVAL_TEST_UNSET_KEY"}}
    settings = {"auth": True, "judge_profiles": profiles, "runner": {"jobs": 4, "poll_s": 0.1, "heartbeat_s": 0.5},
                "limits": {"max_active_jobs": 2, "max_outputs_per_job": 50, "retry_after_s": 7}}
    with Service(folder, settings, env={"SIM_JUDGE_KEY": JUDGE_KEY}) as running:
        yield running


def test_keys_are_required_scoped_and_revocable(service: Service) -> None:
    anonymous = service.client().get("/v1/jobs")
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthorized"
    assert anonymous.headers["www-authenticate"] == "Bearer"
    assert service.client("ore_000000000000_" + "x" * 43).get("/v1/jobs").status_code == 401
    reader = service.new_key("scoped", "read")
    assert service.client(reader).get("/v1/jobs").status_code == 200
    refused = service.client(reader).post("/v1/jobs", json=body())
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    listed = service.keys("list")
    assert listed.returncode == 0 and "tenant=scoped" in listed.stdout
    key_id = reader.split("_")[1]
    assert reader not in listed.stdout and reader.split("_", 2)[2] not in listed.stdout
    assert service.keys("revoke", key_id).returncode == 0
    assert service.client(reader).get("/v1/jobs").status_code == 401
    assert service.keys("revoke", key_id).returncode == 2  # already revoked


def test_a_tenant_never_sees_another_tenants_jobs_uploads_or_cached_judgments(service: Service) -> None:
    alice, bob = service.client(service.new_key("alice")), service.client(service.new_key("bob"))
    job = alice.post("/v1/jobs", json=body()).json()["id"]
    first = wait_status(alice, job, ("completed",))
    for path in ("", "/events", "/results", "/summary", "/manifest", "/report"):
        reply = bob.get(f"/v1/jobs/{job}{path}")
        assert reply.status_code == 404 and reply.json()["code"] == "not_found", path
    assert bob.post(f"/v1/jobs/{job}/cancel").status_code == 404
    assert bob.delete(f"/v1/jobs/{job}").status_code == 404
    assert bob.get("/v1/jobs").json()["jobs"] == []
    upload = alice.post("/v1/uploads", params={"format": "jsonl"}, content=body()["inputs"]["data"]).json()["id"]
    stolen = bob.post("/v1/jobs", json={"config": TREC, "upload_id": upload, "judge_profile": "sim"})
    assert stolen.status_code == 422 and stolen.json()["code"] == "bad_input"

    again = wait_status(alice, alice.post("/v1/jobs", json=body()).json()["id"], ("completed",))
    # every request the first job asked (paid, or answered by an identical one in flight) is a cache hit now
    paid, shared = first["usage"]["calls"], first["usage"]["deduplicated"]
    assert again["usage"]["calls"] == 0 and again["usage"]["cache_hits"] == paid + shared and paid > 0, again
    theirs = wait_status(bob, bob.post("/v1/jobs", json=body()).json()["id"], ("completed",))
    assert theirs["usage"]["cache_hits"] == 0 and theirs["usage"]["calls"] == first["usage"]["calls"]
    assert service.cache("alice") != service.cache("bob") and service.cache("bob").exists()


def test_quotas_answer_429_with_retry_after(service: Service) -> None:
    carol, dave = service.client(service.new_key("carol")), service.client(service.new_key("dave"))
    slow = {**body(outputs_jsonl(30)), "judge_profile": "slow"}
    running = [carol.post("/v1/jobs", json=slow).json()["id"] for _ in range(2)]
    over = carol.post("/v1/jobs", json=slow)
    assert over.status_code == 429 and over.json()["code"] == "quota_jobs"
    assert over.headers["retry-after"] == "7"
    assert dave.post("/v1/jobs", json=body()).status_code == 202  # the quota is per tenant
    too_many = dave.post("/v1/jobs", json=body(outputs_jsonl(60)))
    assert too_many.status_code == 429 and too_many.json()["code"] == "quota_outputs"
    for job in running:
        assert carol.post(f"/v1/jobs/{job}/cancel").status_code == 202
    for job in running:
        wait_status(carol, job, ("cancelled", "completed"))
    assert carol.post("/v1/jobs", json=body()).status_code == 202


def test_a_burst_of_submits_never_queues_more_than_the_quota(service: Service) -> None:
    key, slow = service.new_key("frank"), {**body(outputs_jsonl(30)), "judge_profile": "slow"}

    def submit(_: int) -> tuple[int, str]:
        reply = service.client(key).post("/v1/jobs", json=slow)
        return reply.status_code, reply.json().get("id") or reply.json()["code"]

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(submit, range(8)))
    accepted = [job for status, job in replies if status == 202]
    assert len(accepted) == 2, replies  # limits.max_active_jobs, however the submits interleave
    assert sorted(code for status, code in replies if status != 202) == ["quota_jobs"] * 6
    frank = service.client(key)
    for job in accepted:
        assert frank.post(f"/v1/jobs/{job}/cancel").status_code == 202
    for job in accepted:
        wait_status(frank, job, ("cancelled", "completed"))


def test_cancel_stops_a_job_and_keeps_what_it_judged(service: Service) -> None:
    erin = service.client(service.new_key("erin"))
    slow = {**body(outputs_jsonl(20)), "judge_profile": "slow"}
    job = erin.post("/v1/jobs", json=slow).json()["id"]
    wait_for(lambda: _cached(service.cache("erin")) >= 4, 120)
    busy = erin.delete(f"/v1/jobs/{job}")
    assert busy.status_code == 409 and busy.json()["code"] == "job_active"
    assert erin.post(f"/v1/jobs/{job}/cancel").json()["status"] in ("cancelling", "cancelled")
    cancelled = wait_status(erin, job, ("cancelled",))
    judged = _cached(service.cache("erin"))
    assert judged >= 4 and cancelled["finished"] is not None
    assert erin.get(f"/v1/jobs/{job}/results").json()["code"] == "not_ready"
    events = [e["data"]["status"] for e in sse_events(erin, f"/v1/jobs/{job}/events") if e["event"] == "status"]
    assert events[-2:] == ["cancelling", "cancelled"]
    quick = {**slow, "judge_profile": "sim"}  # the same simulated judge, answering fast: the same cache entries
    redo = wait_status(erin, erin.post("/v1/jobs", json=quick).json()["id"], ("completed",), 300)
    assert redo["usage"]["cache_hits"] >= judged  # nothing judged before the cancel was paid again


def _cached(path: Path) -> int:
    if not path.exists():
        return 0
    with sqlite3.connect(path) as db:
        try:
            return int(db.execute("SELECT COUNT(*) FROM completions").fetchone()[0])
        except sqlite3.OperationalError:
            return 0


def test_no_key_in_any_response_file_or_log(service: Service) -> None:
    api_key = service.new_key("frank")
    frank = service.client(api_key)
    job = frank.post("/v1/jobs", json={**body(), "judge_profile": "keyed"}).json()["id"]
    done = wait_status(frank, job, ("completed", "failed"))
    assert done["status"] == "completed", done["error"]
    assert done["usage"]["calls"] > 0  # the keyed judge answered: the key was sent to it
    seen = [frank.get(path) for path in (f"/v1/jobs/{job}", "/v1/jobs", "/v1/info", f"/v1/jobs/{job}/manifest",
                                         f"/v1/jobs/{job}/report", f"/v1/jobs/{job}/summary", "/dashboard",
                                         f"/v1/jobs/{job}/results?format=csv", f"/v1/jobs/{job}/results?format=json",
                                         f"/dashboard/jobs/{job}", "/openapi.json")]
    texts = [r.text + json.dumps(dict(r.headers)) for r in seen]
    texts += [json.dumps(e) for e in sse_events(frank, f"/v1/jobs/{job}/events")]
    time.sleep(0.5)
    texts.append(service.log.read_text(encoding="utf-8", errors="replace"))
    texts += [p.read_text(encoding="utf-8", errors="replace") for p in service.job_dir(job).rglob("*") if p.is_file()]
    secret = api_key.split("_", 2)[2]
    for text in texts:
        assert JUDGE_KEY not in text and secret not in text


def test_the_dashboard_asks_for_a_key_and_shows_only_the_tenants_jobs(service: Service) -> None:
    key = service.new_key("gina")
    gina = service.client(key)
    job = gina.post("/v1/jobs", json=body()).json()["id"]
    other = service.client(service.new_key("hank")).post("/v1/jobs", json=body()).json()["id"]
    browser = service.client()
    assert browser.get("/dashboard").headers["location"] == "/dashboard/login"
    assert "not valid" in browser.post("/dashboard/login", content="key=ore_nope",
                                       headers={"content-type": "application/x-www-form-urlencoded"}).text
    signed = browser.post("/dashboard/login", content=f"key={key}",
                          headers={"content-type": "application/x-www-form-urlencoded"})
    assert signed.status_code == 303 and "httponly" in signed.headers["set-cookie"].lower()
    page = browser.get("/dashboard")
    assert page.status_code == 200 and job in page.text and other not in page.text
    assert browser.get(f"/dashboard/jobs/{other}").status_code == 404
    assert key not in page.text


def test_a_job_whose_judge_cannot_be_used_fails_with_a_code_and_no_server_path(service: Service) -> None:
    ivan = service.client(service.new_key("ivan"))
    job = ivan.post("/v1/jobs", json={**body(), "judge_profile": "unset"}).json()["id"]
    failed = wait_status(ivan, job, ("failed", "completed"))
    assert failed["status"] == "failed"
    assert failed["error"]["code"] == "bad_config"
    assert "OPEN_RAG_EVAL_TEST_UNSET_KEY" in failed["error"]["detail"]
    assert str(service.folder) not in failed["error"]["detail"]
