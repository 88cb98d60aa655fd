"""Usage that adds up: a job's and a sweep run's usage equal what the loopback judge answered (calls and tokens);
``GET /v1/usage`` sums a tenant's attempts per profile and period, and another tenant's are never in it."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.service.jobs import sum_usage
from tests.service_server import Service, wait_status

JUDGE_KEY = "sk-sim-made-up-usage-key-0c9e44a1"  # made up: the external simulated judge's key


def test_attempts_add_up_and_an_unknown_cost_stays_unknown() -> None:
    first = {"calls": 296, "cache_hits": 0, "prompt_tokens": 1000, "completion_tokens": 50, "cost_usd": 0.25}
    second = {"calls": 308, "cache_hits": 296, "prompt_tokens": 1100, "completion_tokens": 60, "cost_usd": 0.5}
    total = sum_usage([first, second])
    assert total["calls"] == 604 and total["cache_hits"] == 296 and total["attempts"] == 2
    assert total["prompt_tokens"] == 2100 and total["completion_tokens"] == 110 and total["cost_usd"] == 0.75
    assert sum_usage([{"calls": 3, "cost_usd": None}])["cost_usd"] is None
    assert sum_usage([]) == {}


@pytest.fixture(scope="module")
def judge() -> Iterator[Any]:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

    server = SimulatedJudgeServer(SimulatedServerConfig(api_key=JUDGE_KEY, latency_ms=1))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def rag() -> Iterator[Any]:
    from tests.rag_server import RagServer

    with RagServer() as server:
        yield server


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, judge: Any, rag: Any) -> Iterator[Service]:
    pytest.importorskip("fastapi", reason="the [server] extra is not installed")
    profiles = {"paid": {"model": "simulated-judge", "base_url": judge.base_url, "api_key_env": "USAGE_JUDGE_KEY",
                         "prices": {"input": 1.0, "output": 2.0}}}
    settings = {"auth": True, "judge_profiles": profiles, "inline_evaluators": ["trec", "consistency"],
                "connector_allow": [rag.url.rsplit("/", 1)[0] + "/"],
                "runner": {"jobs": 2, "poll_s": 0.1, "heartbeat_s": 0.5}}
    with Service(tmp_path_factory.mktemp("usage"), settings, env={"USAGE_JUDGE_KEY": JUDGE_KEY}) as running:
        yield running


def _paid(judge: Any, since: int) -> tuple[int, int, int]:
    log = judge.stats.log[since:]
    return len(log), sum(r.prompt_tokens for r in log), sum(r.completion_tokens for r in log)


@pytest.mark.slow
def test_jobs_and_sweep_runs_report_what_the_judge_answered_and_usage_sums_them(service: Service, judge: Any,
                                                                               rag: Any) -> None:
    from tests.test_service_api import body, outputs_jsonl
    from tests.test_sweep import QUERIES

    key = service.new_key("acme")
    client, other = service.client(key), service.client(service.new_key("other"))
    start = time.time()
    before = len(judge.stats.log)
    job = client.post("/v1/jobs", json={**body(outputs_jsonl(3)), "judge_profile": "paid"}).json()["id"]
    done = wait_status(client, job, ("completed", "failed"))
    assert done["status"] == "completed", done["error"]
    calls, prompt, completion = _paid(judge, before)
    assert calls > 0
    assert (done["usage"]["calls"], done["usage"]["prompt_tokens"], done["usage"]["completion_tokens"]) == (
        calls, prompt, completion)

    sweep = client.post("/v1/sweeps", json={
        "name": "paid", "judge_profile": "paid",
        "queries": "query_id,query\n" + "".join(f"t{i},{q}\n" for i, q in enumerate(QUERIES[:2])),
        "config": {"connector": {"type": "http", "repeats": 2, "options": {
            "url": rag.url, "body": {"query": "{query}", "query_id": "{query_id}"}, "backoff_s": 0}},
            "evaluators": [{"type": "trec", "metrics": ["umbrela"]}, {"type": "consistency", "metrics": ["rouge"]}],
            "sweep": {"system": "paid"}}})
    assert sweep.status_code == 201, sweep.text
    before = len(judge.stats.log)
    run = client.post(f"/v1/sweeps/{sweep.json()['id']}/runs").json()["id"]
    ran = wait_status(client, run, ("completed", "failed"), 300)
    assert ran["status"] == "completed", ran["error"]
    calls_sweep, prompt_sweep, completion_sweep = _paid(judge, before)
    assert calls_sweep > 0 and ran["usage"]["calls"] == calls_sweep  # no longer {}
    assert ran["usage"]["prompt_tokens"] == prompt_sweep

    billed = client.get("/v1/usage", params={"since": start - 1}).json()
    assert billed["tenant"] == "acme"
    assert billed["total"]["calls"] == calls + calls_sweep and billed["total"]["jobs"] == 2
    assert billed["total"]["prompt_tokens"] == prompt + prompt_sweep
    assert billed["total"]["completion_tokens"] == completion + completion_sweep
    cost = ((prompt + prompt_sweep) * 1.0 + (completion + completion_sweep) * 2.0) / 1e6
    assert billed["total"]["cost_usd"] == pytest.approx(cost)
    assert [p["judge_profile"] for p in billed["by_profile"]] == ["paid"]
    assert other.get("/v1/usage").json()["total"]["calls"] == 0
    assert client.get("/v1/usage", params={"since": time.time() + 3600}).json()["total"]["calls"] == 0
    assert client.delete(f"/v1/jobs/{job}").status_code == 204  # a deleted job's usage stays billed
    assert client.get("/v1/usage", params={"since": start - 1}).json()["total"]["calls"] == calls + calls_sweep
    bad = client.get("/v1/usage", params={"since": "yesterday"})
    assert bad.status_code == 422 and bad.headers["content-type"] == "application/problem+json"


def test_usage_is_in_the_openapi_description() -> None:
    import json

    from open_rag_eval.service.openapi import COMMITTED

    schema = json.loads(Path(COMMITTED).read_text(encoding="utf-8"))
    assert "/v1/usage" in schema["paths"]


@pytest.mark.slow
def test_metrics_for_prometheus_add_up_to_what_the_judge_answered(service: Service, judge: Any) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from tests.test_service_api import body, outputs_jsonl

    client = service.client(service.new_key("metered"))
    assert client.get("/metrics").status_code == 403  # a tenant's key sees no deployment-wide numbers
    scraper = service.client(service.new_key("ops", "metrics"))
    job = client.post("/v1/jobs", json={**body(outputs_jsonl(2).replace("topic", "metered topic")),
                                        "judge_profile": "paid"}).json()["id"]
    assert wait_status(client, job, ("completed", "failed"))["status"] == "completed"
    reply = scraper.get("/metrics")
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(reply.text) for s in family.samples}
    paid = judge.stats.requests  # every job of this module used this judge
    assert samples[("open_rag_eval_judge_calls_total", (("profile", "paid"),))] == paid
    prompt = sum(r.prompt_tokens for r in judge.stats.log)
    assert samples[("open_rag_eval_judge_tokens_total", (("kind", "prompt"), ("profile", "paid")))] == prompt
    assert samples[("open_rag_eval_judge_cost_usd_total", (("profile", "paid"),))] > 0
    assert samples[("open_rag_eval_jobs", (("state", "completed"),))] >= 1
    assert samples[("open_rag_eval_jobs", (("state", "running"),))] == 0
    assert samples[("open_rag_eval_queue_depth", ())] == 0
    assert ("open_rag_eval_judge_failed_calls_total", (("profile", "paid"),)) in samples
    durations = samples[("open_rag_eval_judge_request_seconds_count", (("profile", "paid#0"),))]
    assert durations == paid  # this server's runner made every request and timed each
