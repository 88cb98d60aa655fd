"""Cancelling a job that is still queued: it ends ``cancelled`` at once, no runner ever starts it (not even one that
starts later on the same database), and its result endpoints say it has no results.

Deterministic: the first server only queues (``runner.jobs: 0``); the second, on the same database, runs jobs and
proves it polled the queue by completing a job submitted after the cancel.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.service_server import Service, sse_events, wait_status
from tests.test_service_api import body, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow

RESULTS = ("/results?format=csv", "/results?format=json", "/results?format=jsonl", "/summary", "/manifest", "/report")


def test_a_queued_job_cancelled_before_it_started_is_never_run(tmp_path: Path) -> None:
    with Service(tmp_path, {"runner": {"jobs": 0}}) as queue_only:
        client = queue_only.client()
        job = client.post("/v1/jobs", json=body(outputs_jsonl(2))).json()["id"]
        assert client.get(f"/v1/jobs/{job}").json()["status"] == "queued"
        cancelled = client.post(f"/v1/jobs/{job}/cancel")
        assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
        assert client.post(f"/v1/jobs/{job}/cancel").json()["status"] == "cancelled"  # asking again changes nothing

    with Service(tmp_path, {"runner": {"jobs": 2, "poll_s": 0.1}}) as running:  # the same database, now with a runner
        client = running.client()
        later = client.post("/v1/jobs", json=body(outputs_jsonl(2))).json()["id"]
        assert wait_status(client, later, ("completed", "failed"), 300)["status"] == "completed"

        view = client.get(f"/v1/jobs/{job}").json()
        assert view["status"] == "cancelled" and view["started"] is None and view["finished"] is not None
        assert view["progress"] == {} and view["usage"] == {} and view["error"] is None
        statuses = [e["data"]["status"] for e in sse_events(client, f"/v1/jobs/{job}/events") if e["event"] == "status"]
        assert statuses == ["queued", "cancelled"]  # never "running"
        for path in RESULTS:
            reply = client.get(f"/v1/jobs/{job}{path}")
            assert reply.status_code == 409, (path, reply.text)
            assert reply.json()["code"] == "not_ready" and "cancelled" in reply.json()["detail"]
        assert not list(running.job_dir(job).rglob("results.*"))  # nothing of a run in its folder
        assert f"job {later}: started" in running.log.read_text() and f"job {job}:" not in running.log.read_text()
        with sqlite3.connect(tmp_path / "data" / "service.sqlite") as db:
            item = db.execute("SELECT status, claimed_by, attempts FROM work_items WHERE job_id = ?", (job,)).fetchone()
            runs = db.execute("SELECT runs FROM jobs WHERE id = ?", (job,)).fetchone()[0]
        assert item == ("done", None, 0) and runs == 0  # never claimed

        assert client.delete(f"/v1/jobs/{job}").status_code == 204  # a cancelled job is finished: it can go
        assert client.get(f"/v1/jobs/{job}").status_code == 404
