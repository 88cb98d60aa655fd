"""Stopping ``serve`` and ``worker`` with SIGINT or SIGTERM while they run jobs is clean: exit 0, no traceback and no
record at ERROR level in their logs (the processes log with level names here), and the interrupted jobs are taken up
again and completed by a worker started afterwards.

Nothing waits on a clock: the signal is sent once each process has started a job (its log says so), and the rest
waits on the jobs' statuses.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.postgres_server import PostgresServer, unavailable
from tests.service_server import Service, free_port, wait_for, wait_status
from tests.test_service_api import body, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow

LEVELLED = ("import logging, sys; logging.basicConfig(level=logging.INFO, format='%(levelname)s %(name)s: %(message)s');"
            " from open_rag_eval.cli import main; sys.exit(main(sys.argv[1:]))")
SLOW = {"model": "simulated-judge", "simulated": {"latency_ms": 200}, "max_concurrency": 2}  # a job lasts seconds


class LevelledService(Service):
    """``serve`` and ``worker`` whose log lines start with the record's level."""

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-c", LEVELLED, *args]


def _worker(service: Service, name: str) -> subprocess.Popen[bytes]:
    with (service.folder / f"{name}.log").open("ab") as log:
        return subprocess.Popen(service.command("worker", "--config", str(service.config), "--jobs", "1"),
                                stdout=log, stderr=subprocess.STDOUT, env=service.env)


def _assert_clean(log: str, stopped: str) -> None:
    assert "Traceback" not in log and "CancelledError" not in log, log[-3000:]
    assert not [line for line in log.splitlines() if line.startswith(("ERROR", "CRITICAL"))], log[-3000:]
    assert stopped in log, log[-3000:]


def _stop_while_running(service: Service, signum: int, worker: bool) -> None:
    """Submit slow jobs, send ``signum`` once serve (and the worker) started one, check both ended cleanly, then
    let a fresh worker finish every job."""
    client = service.start().client()
    workers = [_worker(service, "worker")] if worker else []
    logs = [service.log, *(service.folder / "worker.log" for _ in workers)]
    wait_for(lambda: all("taking jobs" in log.read_text() for log in logs[1:]), 180)
    # each process runs one job at a time and a job lasts seconds: each takes one of these two
    jobs = [client.post("/v1/jobs", json={**body(outputs_jsonl(4)), "judge_profile": "slow"}).json()["id"]
            for _ in range(2)]
    wait_for(lambda: all(": started" in log.read_text() for log in logs), 180)
    assert service.process is not None
    for process in (service.process, *workers):
        process.send_signal(signum)
    for process in (service.process, *workers):
        assert process.wait(120) == 0
    service.process = None
    _assert_clean(service.log.read_text(), "open-rag-eval service stopped")
    for _ in workers:
        _assert_clean((service.folder / "worker.log").read_text(), "stopped after")

    service.start()  # the jobs the stop interrupted are taken up again
    if service.settings.get("database_url"):
        workers = [_worker(service, "after")]
    try:
        client = service.client()
        done = [wait_status(client, job, ("completed", "failed"), 300)["status"] for job in jobs]
    finally:
        for process in workers:
            process.send_signal(signal.SIGTERM)
            process.wait(120)
    assert done == ["completed"] * 2


@pytest.fixture
def database(tmp_path_factory: pytest.TempPathFactory) -> Any:
    if unavailable() is not None:
        pytest.skip(str(unavailable()))
    pytest.importorskip("asyncpg", reason="asyncpg (the [server] extra) is not installed")
    server = PostgresServer(tmp_path_factory.mktemp("pg"), free_port())
    yield server.start()
    server.stop()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_serve_and_worker_stop_cleanly_on_postgresql(tmp_path: Path, database: str, signum: int) -> None:
    service = LevelledService(tmp_path, {"database_url": database, "judge_profiles": {"slow": SLOW},
                                         "runner": {"jobs": 1, "poll_s": 0.1, "heartbeat_s": 0.5,
                                                    "stale_after_s": 3}})
    try:
        _stop_while_running(service, signum, worker=True)
    finally:
        service.stop()


def test_serve_stops_cleanly_on_sqlite(tmp_path: Path) -> None:
    service = LevelledService(tmp_path, {"judge_profiles": {"slow": SLOW},
                                         "runner": {"jobs": 1, "poll_s": 0.1, "heartbeat_s": 0.5}})
    try:
        _stop_while_running(service, signal.SIGTERM, worker=False)
    finally:
        service.stop()
