"""PostgreSQL mode against a real PostgreSQL server started from the installed binaries: one ``serve`` replica that
only takes requests and two ``worker`` processes claiming from one queue -- every job done exactly once; a worker
killed mid-job has its claim taken over by the other."""

from __future__ import annotations

import signal
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.postgres_server import PostgresServer, unavailable
from tests.ray_setup import CountingJudge
from tests.service_server import Service, free_port, sse_events, wait_for, wait_status
from tests.test_service_api import body, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("asyncpg", reason="asyncpg (the [server] extra) is not installed")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


@pytest.fixture
def database(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = PostgresServer(tmp_path_factory.mktemp("pg"), free_port())
    url = server.start()
    yield url
    server.stop()


def _workers(service: Service, n: int) -> list[subprocess.Popen[bytes]]:
    workers = []
    for i in range(n):
        log = (service.folder / f"worker{i}.log").open("ab")
        workers.append(subprocess.Popen(service.command("worker", "--config", str(service.config), "--jobs", "2"), stdout=log,
                                        stderr=subprocess.STDOUT, env=service.env))
        log.close()
    return workers


def _stop(workers: list[subprocess.Popen[bytes]]) -> None:
    for worker in workers:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
    for worker in workers:
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def test_two_workers_share_one_queue_and_every_job_is_done_exactly_once(tmp_path: Path, database: str) -> None:
    service = Service(tmp_path, {"database_url": database, "runner": {"jobs": 0},
                                 "limits": {"max_active_jobs": 100}})
    with service:
        client = service.client()
        assert client.get("/v1/info").json()["database"] == "postgresql"
        workers = _workers(service, 2)
        try:
            ids = [client.post("/v1/jobs", json=body(outputs_jsonl(2))).json()["id"] for _ in range(16)]
            finished = [wait_status(client, job, ("completed", "failed"), 300) for job in ids]
        finally:
            _stop(workers)
        assert [job["status"] for job in finished] == ["completed"] * 16, [job["error"] for job in finished]
        runs = Counter()
        for job in ids:
            statuses = [e["data"] for e in sse_events(client, f"/v1/jobs/{job}/events") if e["event"] == "status"]
            runs[job] = sum(1 for s in statuses if s["status"] == "running")
        assert set(runs.values()) == {1}, runs  # each job started once: never claimed twice
        logs = [(tmp_path / f"worker{i}.log").read_text() for i in range(2)]
        assert all("taking jobs" in log for log in logs)
        assert sum(1 for log in logs if "started" in log) == 2, "both workers took jobs"


def test_a_dead_workers_claim_is_taken_over(tmp_path: Path, database: str) -> None:
    with CountingJudge() as judge:
        held = {"model": "simulated-judge", "base_url": judge.base_url, "max_concurrency": 2}
        service = Service(tmp_path, {"database_url": database, "judge_profiles": {"held": held},
                                     "runner": {"jobs": 0, "heartbeat_s": 0.5, "stale_after_s": 3, "poll_s": 0.2}})
        with service:
            client = service.client()
            first = _workers(service, 1)
            judge.hold_after = 4  # then the job waits mid-run until its worker is killed
            job = client.post("/v1/jobs", json={**body(outputs_jsonl(6)), "judge_profile": "held"}).json()["id"]
            wait_for(lambda: judge.held and client.get(f"/v1/jobs/{job}").json()["usage"].get("calls", 0) >= 4, 120)
            first[0].kill()  # kill -9: its claim stays behind, its heartbeat stops
            first[0].wait()
            judge.release()
            judge.hold_after = None
            second = _workers(service, 1)
            try:
                done = wait_status(client, job, ("completed", "failed"), 300)
            finally:
                _stop(second)
            assert done["status"] == "completed"
            statuses = [e["data"] for e in sse_events(client, f"/v1/jobs/{job}/events") if e["event"] == "status"]
            assert [s["status"] for s in statuses] == ["queued", "running", "running", "completed"]
            assert statuses[2]["resumed"] is True
            assert done["usage"]["cache_hits"] >= 4  # what the dead worker judged was not asked again
