"""A job whose every judged metric failed is ``incomplete`` (error code ``incomplete``), never ``completed``: in the
job view, its events, the job list filter and the dashboard; its results are written and can be fetched, as the
CLI writes them and exits 6 (``run.status``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.openai_server import Reply, ScriptedServer
from tests.service_server import Service, sse_events, wait_status
from tests.test_service_api import body, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("uvicorn", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow

NULL = Reply.shaped({"role": "assistant", "content": None})


def test_a_job_whose_judged_metrics_all_failed_is_incomplete(tmp_path: Path) -> None:
    with ScriptedServer(default=NULL) as judge:
        profile: dict[str, Any] = {"model": "gpt-4o-mini", "base_url": judge.base_url,
                                   "api_key_env": "OPEN_RAG_EVAL_TEST_NO_KEY", "backoff_base_s": 0.001,
                                   "backoff_cap_s": 0.002}
        with Service(tmp_path / "svc", {"judge_profiles": {"null": profile}}) as service:
            client = service.client()
            job_id = client.post("/v1/jobs", json={**body(outputs_jsonl(3)), "judge_profile": "null"}).json()["id"]
            job = wait_status(client, job_id, ("completed", "incomplete", "failed"), 300)
            assert job["status"] == "incomplete", job
            assert job["error"]["code"] == "incomplete"
            assert job["error"]["detail"].startswith("umbrela.mean, nuggets.vital_strict")
            assert "failed for every output; commonest reason: " in job["error"]["detail"]
            assert "empty reply from the judge (content null" in job["error"]["detail"]
            statuses = [e["data"] for e in sse_events(client, f"/v1/jobs/{job_id}/events") if e["event"] == "status"]
            assert statuses[-1]["status"] == "incomplete" and statuses[-1]["error"]["code"] == "incomplete"
            assert all(s["status"] != "completed" for s in statuses)
            listed = client.get("/v1/jobs", params={"status": "incomplete"}).json()
            assert [j["id"] for j in listed["jobs"]] == [job_id]
            summary = client.get(f"/v1/jobs/{job_id}/summary")  # the results are written, as the CLI writes them
            assert summary.status_code == 200 and ",failed," in summary.text
            assert client.get(f"/v1/jobs/{job_id}/manifest").json()["complete"] is False
            page = client.get(f"/dashboard/jobs/{job_id}").text
            assert "class='status incomplete'>incomplete<" in page and "incomplete: umbrela.mean" in page
