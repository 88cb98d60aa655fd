"""PostgreSQL mode against a real PostgreSQL server started from the installed binaries: one ``serve`` replica that
only takes requests and two ``worker`` processes claiming from one queue -- every job done exactly once; two ``serve``
replicas that both run jobs and a ``worker`` share the queue (jobs submitted, watched, fetched and cancelled through
either replica); a worker killed mid-job has its claim taken over by the other."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.gated_judge import GatedJudge
from tests.postgres_server import PostgresServer, unavailable
from tests.ray_setup import CountingJudge
from tests.service_server import Service, free_port, sse_events, wait_for, wait_status
from tests.test_service_api import body, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("asyncpg", reason="asyncpg (the [server] extra) is not installed")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))]


@pytest.fixture
def database() -> Any:
    # not under pytest's own temporary folder: a pytest starting meanwhile makes that private again (0700), and the
    # server, running as the postgres user when the tests run as root, would lose its data folder
    folder = Path(tempfile.mkdtemp(prefix="open-rag-eval-pg-"))
    server = PostgresServer(folder, free_port())
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _workers(service: Service, n: int, jobs: int = 2) -> list[subprocess.Popen[bytes]]:
    workers = []
    for i in range(n):
        log = (service.folder / f"worker{i}.log").open("ab")
        workers.append(subprocess.Popen(service.command("worker", "--config", str(service.config), "--jobs", str(jobs)), stdout=log,
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


HELD = "zebraheld"  # in the judge requests of the jobs the judge holds until the test opens it


def _tagged(tag: str, n: int = 2) -> str:
    """``n`` outputs no other job has: every judge request belongs to exactly one job."""
    return outputs_jsonl(n).replace("topic", f"topic {tag}")


def _started(log: Path) -> set[str]:
    return set(re.findall(r"job (\w+): started", log.read_text()))


async def _attempts(url: str) -> dict[str, tuple[int, int]]:
    """job -> (runs, work item attempts), as the database recorded them."""
    import asyncpg

    connection = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        rows = await connection.fetch("SELECT j.id, j.runs, w.attempts FROM jobs j "
                                      "JOIN work_items w ON w.job_id = j.id")
    finally:
        await connection.close()
    return {row["id"]: (row["runs"], row["attempts"]) for row in rows}


def test_two_serve_replicas_and_a_worker_share_one_queue(tmp_path: Path, database: str) -> None:
    """Both replicas run jobs (``runner.jobs: 2``) beside one worker: while the judge holds the first six jobs, each
    of the three processes runs two of them (so all three take work) and a seventh stays queued; a job is submitted,
    watched, fetched and cancelled through either replica; every job runs once and each judge request is answered
    once."""
    with GatedJudge(gate=HELD.encode()) as judge:
        profile = {"model": "simulated-judge", "base_url": judge.base_url, "max_concurrency": 4, "timeout_s": 600}
        settings = {"database_url": database, "data_dir": str(tmp_path / "shared"),
                    "judge_profiles": {"gated": profile},
                    "runner": {"jobs": 2, "poll_s": 0.1, "heartbeat_s": 0.5, "stale_after_s": 60},
                    "limits": {"max_active_jobs": 100}}
        replicas = [Service(tmp_path / name, settings) for name in ("a", "b")]
        logs = [replicas[0].log, replicas[1].log, tmp_path / "a" / "worker0.log"]
        workers: list[subprocess.Popen[bytes]] = []
        try:
            for replica in replicas:  # one after the other: each migrates the database as it starts
                replica.start(180)
            workers = _workers(replicas[0], 1)
            clients = [replica.client() for replica in replicas]
            a, b = clients
            assert a.get("/v1/info").json()["database"] == b.get("/v1/info").json()["database"] == "postgresql"
            submitted: dict[str, int] = {}  # job -> the replica it was submitted through

            def submit(via: int, tag: str) -> str:
                reply = clients[via].post("/v1/jobs", json={**body(_tagged(tag)), "judge_profile": "gated"})
                assert reply.status_code == 202, reply.text
                submitted[reply.json()["id"]] = via
                return str(reply.json()["id"])

            # six held jobs fill the six job slots of the three processes: each process runs two of them
            held = [submit(i % 2, f"{HELD} h{i}") for i in range(6)]
            wait_for(lambda: all(clients[1 - submitted[job]].get(f"/v1/jobs/{job}").json()["status"] == "running"
                                 for job in held), 300)
            taken = lambda: [len(_started(log) & set(held)) for log in logs]  # noqa: E731
            wait_for(lambda: sum(taken()) == 6, 60)  # a runner logs the start just after its claim is recorded
            assert taken() == [2, 2, 2]

            waiting = submit(0, f"{HELD} w")  # no process has a free slot: it stays queued ...
            assert b.get(f"/v1/jobs/{waiting}").json()["status"] == "queued"
            assert b.post(f"/v1/jobs/{waiting}/cancel").json()["status"] == "cancelled"  # ... cancelled through b
            assert b.post(f"/v1/jobs/{held[0]}/cancel").status_code == 202  # running, submitted through a
            assert wait_status(a, held[0], ("cancelled", "completed", "failed"), 300)["status"] == "cancelled"
            judge.open()
            more = [submit(i % 2, f"free f{i}") for i in range(6)]
            done = {job: wait_status(clients[1 - submitted[job]], job, ("completed", "failed", "cancelled"), 300)
                    for job in held[1:] + more}
            assert {job: view["status"] for job, view in done.items()} == dict.fromkeys(done, "completed"), [
                view["error"] for view in done.values() if view["status"] != "completed"]
            assert a.get(f"/v1/jobs/{waiting}").json()["status"] == "cancelled"

            for job, via in submitted.items():  # each replica answers for the jobs submitted through the other
                mine, other = clients[via], clients[1 - via]
                assert mine.get(f"/v1/jobs/{job}").json() == other.get(f"/v1/jobs/{job}").json()
                statuses = [e["data"]["status"] for e in sse_events(other, f"/v1/jobs/{job}/events")
                            if e["event"] == "status"]
                assert statuses.count("running") == (0 if job == waiting else 1), (job, statuses)
                if job in done:
                    for path in ("results?format=json", "results?format=csv", "summary", "report"):
                        fetched, own = other.get(f"/v1/jobs/{job}/{path}"), mine.get(f"/v1/jobs/{job}/{path}")
                        assert fetched.status_code == 200 and fetched.content == own.content
                    assert len(other.get(f"/v1/jobs/{job}/results?format=json").json()["outputs"]) == 2
        finally:
            _stop(workers)
            for replica in replicas:
                replica.stop()

    # each job ran once: one start in all three logs, one run and one claim recorded in the database
    starts = Counter(job for log in logs for job in re.findall(r"job (\w+): (?:started|resumed)", log.read_text()))
    assert {job: starts[job] for job in done} == dict.fromkeys(done, 1) and starts[waiting] == 0
    recorded = asyncio.run(_attempts(database))
    assert {job: recorded[job] for job in done} == dict.fromkeys(done, (1, 1)) and recorded[waiting] == (0, 0)
    # every judge request answered once (no job asked the judge twice), and they are all the completed jobs' calls
    assert set(judge.answered.values()) == {1}
    assert sum(judge.answered.values()) == sum(view["usage"]["calls"] for view in done.values())
