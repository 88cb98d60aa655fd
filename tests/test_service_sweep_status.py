"""A sweep run through the service has the run status of every job: a sweep whose judged metric failed for every
output ends ``incomplete`` (error code ``incomplete``) with its verdict recorded -- in the job view, its events, the
sweep's runs and the job list filter -- as the CLI's ``sweep`` exits 6; a complete one ends ``completed``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.openai_server import Reply, ScriptedServer
from tests.rag_server import RagServer
from tests.service_server import Service, sse_events, wait_status
from tests.test_sweep import QUERIES

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow

NULL = Reply.shaped({"role": "assistant", "content": None})
POLITE = Reply.ok('{"reason": "Courteous.", "score": "yes"}')


def _sweep(url: str, profile: str) -> dict[str, Any]:
    return {"name": f"nightly-{profile}", "judge_profile": profile,
            "queries": "query_id,query\n" + "".join(f"t{i},{q}\n" for i, q in enumerate(QUERIES[:3])),
            "config": {"connector": {"type": "http", "repeats": 2, "options": {
                "url": url, "body": {"query": "{query}", "query_id": "{query_id}"}, "backoff_s": 0}},
                "evaluators": [{"type": "criteria", "criteria": [
                    {"name": "polite", "question": "Is the answer polite?"}]}],
                "sweep": {"system": "demo", "thresholds": {"criteria.polite": 0.1}}}}


def test_a_sweep_run_whose_judged_metric_failed_everywhere_is_incomplete(tmp_path: Path) -> None:
    with RagServer() as rag, ScriptedServer(default=NULL) as null, ScriptedServer(default=POLITE) as polite:
        judge = {"model": "gpt-4o-mini", "api_key_env": "OPEN_RAG_EVAL_TEST_NO_KEY", "backoff_base_s": 0.001,
                 "backoff_cap_s": 0.002}
        settings = {"judge_profiles": {"null": {**judge, "base_url": null.base_url},
                                       "polite": {**judge, "base_url": polite.base_url}},
                    "connector_allow": [rag.url.rsplit("/", 1)[0] + "/"],
                    "inline_evaluators": ["criteria"]}
        with Service(tmp_path / "svc", settings) as service:
            client = service.client()
            runs = {}
            for profile in ("null", "polite"):
                created = client.post("/v1/sweeps", json=_sweep(rag.url, profile))
                assert created.status_code == 201, created.text
                triggered = client.post(f"/v1/sweeps/{created.json()['id']}/runs")
                assert triggered.status_code == 202, triggered.text
                runs[profile] = (created.json()["id"], triggered.json()["id"])
            sweep_id, job_id = runs["null"]
            job = wait_status(client, job_id, ("completed", "incomplete", "failed"), 300)
            assert (job["status"], job["kind"], job["verdict"]) == ("incomplete", "sweep", "first"), job
            assert job["error"]["code"] == "incomplete"
            assert job["error"]["detail"].startswith(  # its only metric has no value: said first, then named
                "no metric has a value for any output: criteria.polite failed for every output; commonest reason: ")
            assert "empty reply from the judge (content null" in job["error"]["detail"]
            statuses = [e["data"] for e in sse_events(client, f"/v1/jobs/{job_id}/events") if e["event"] == "status"]
            assert statuses[-1]["status"] == "incomplete" and all(s["status"] != "completed" for s in statuses)
            listed = client.get(f"/v1/sweeps/{sweep_id}/runs").json()["runs"]
            assert [(r["id"], r["status"]) for r in listed] == [(job_id, "incomplete")]
            assert [j["id"] for j in client.get("/v1/jobs", params={"status": "incomplete"}).json()["jobs"]] == [job_id]
            # the same sweep with a judge that answers: completed, no error
            done = wait_status(client, runs["polite"][1], ("completed", "incomplete", "failed"), 300)
            assert (done["status"], done["verdict"], done["error"]) == ("completed", "first", None), done
