"""A job's claim is renewed apart from its CPU work: a run that holds the runner's event loop far longer than
``stale_after_s`` is not taken over by another worker (SQLite and a real PostgreSQL), while the claim of a runner
that stopped renewing is (the control that shows the probing worker would have taken it).

No timing races: the job blocks its loop until the probe says so; the probe keeps trying to claim for three times
``stale_after_s`` (renewals come every ``stale_after_s / 20``), and counts the runner's own ticks to prove the
loop really was blocked the whole time.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.postgres_server import PostgresServer, unavailable
from tests.service_server import free_port

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("aiosqlite", reason="the [server] extra is not installed")

from open_rag_eval.run.status import RunStatus  # noqa: E402
from open_rag_eval.service import jobs  # noqa: E402
from open_rag_eval.service.db import open_engine  # noqa: E402
from open_rag_eval.service.runner import Runner  # noqa: E402
from open_rag_eval.service.settings import Settings  # noqa: E402
from open_rag_eval.service.storage import Storage  # noqa: E402

STALE_S = 2.0
RUNNER = {"jobs": 1, "poll_s": 0.05, "heartbeat_s": STALE_S / 20, "stale_after_s": STALE_S}


class BlockingRunner(Runner):
    """A runner whose job is one long CPU stretch on the runner's loop, until ``release`` is set."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.blocking, self.release = threading.Event(), threading.Event()
        self.ticks = 0

    async def _tick(self, job_id: str, progress: Any, attempt: int = 1) -> bool:
        self.ticks += 1
        return await super()._tick(job_id, progress, attempt)

    async def _execute(self, job: dict[str, Any], progress: Any) -> tuple[Path, str | None, RunStatus]:
        self.blocking.set()
        while not self.release.is_set():  # CPU on the loop: no tick, no other task of this loop runs meanwhile
            sum(range(5000))
        return self.settings.data_path, None, RunStatus()


class Probe:
    """Another worker on its own thread and engine, trying to claim while the job blocks its runner's loop."""

    def __init__(self, runner: BlockingRunner) -> None:
        self.runner = runner
        self.claimed: dict[str, Any] | None = None
        self.attempts = 0
        self.ticks_blocked: tuple[int, int] = (0, 0)
        self.renewals_blocked: tuple[int, int] = (0, 0)
        self.blocked_s = 0.0
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    async def _run(self) -> None:
        runner = self.runner
        try:
            assert runner.blocking.wait(120), "the job never started"
            engine = open_engine(runner.settings.db_url)
            start, ticks, renewals = time.monotonic(), runner.ticks, runner.heartbeat.renewals
            try:
                while time.monotonic() - start < 3 * STALE_S and self.claimed is None:
                    self.claimed = await jobs.claim(engine, "probe", STALE_S)
                    self.attempts += 1
                    await asyncio.sleep(0.05)
            finally:
                await engine.dispose()
            self.blocked_s = time.monotonic() - start
            self.ticks_blocked = (ticks, runner.ticks)
            self.renewals_blocked = (renewals, runner.heartbeat.renewals)
        finally:
            runner.release.set()


def run_blocked_job(settings: Settings, *, renew: bool = True) -> tuple[Probe, dict[str, Any], list[str]]:
    """Queue one job, run it on a ``BlockingRunner`` while a ``Probe`` tries to take it; the job's row and its
    status events afterwards."""

    async def main() -> tuple[Probe, dict[str, Any], list[str]]:
        storage = await Storage.open(settings)
        try:
            job_id = jobs.new_id()
            await jobs.create_job(storage.engine, job_id=job_id, tenant="t", kind="eval", request={},
                                  request_hash="h", idempotency_key=None, judge_profile="sim", n_outputs=1)
            runner = BlockingRunner(storage.engine, settings)
            if not renew:  # a runner that stopped renewing, as a dead process does
                runner.heartbeat.hold = lambda _job_id: None  # type: ignore[method-assign]
            probe = Probe(runner)
            probe.thread.start()
            stop = asyncio.Event()
            task = asyncio.create_task(runner.run(stop))
            while not runner.release.is_set() or runner.active:
                await asyncio.sleep(0.05)
            stop.set()
            await task
            probe.thread.join(60)
            row = await jobs.get_job(storage.engine, None, job_id)
            assert row is not None
            events = await jobs.read_events(storage.engine, job_id)
            return probe, row, [json.loads(e["data"])["status"] for e in events if e["type"] == "status"]
        finally:
            await storage.close()

    return asyncio.run(main())


def _settings(tmp_path: Path, url: str | None = None) -> Settings:
    return Settings.model_validate({"data_dir": str(tmp_path / "data"), "database_url": url, "runner": RUNNER,
                                    "judge_profiles": {"sim": {"model": "simulated-judge", "simulated": {}}}})


def _assert_kept(probe: Probe, row: dict[str, Any], statuses: list[str]) -> None:
    assert probe.claimed is None, "another worker took over a job whose process was alive"
    assert probe.blocked_s >= 3 * STALE_S and probe.attempts >= 3
    assert probe.ticks_blocked[0] == probe.ticks_blocked[1], "the runner's loop was not blocked"
    assert probe.renewals_blocked[1] > probe.renewals_blocked[0], "no claim renewal while the loop was blocked"
    assert row["status"] == "completed" and row["runs"] == 1
    assert statuses == ["queued", "running", "completed"]


def test_a_job_blocking_its_loop_past_stale_after_is_not_taken_over_sqlite(tmp_path: Path) -> None:
    _assert_kept(*run_blocked_job(_settings(tmp_path)))


def test_a_runner_that_stops_renewing_loses_its_claim_sqlite(tmp_path: Path) -> None:
    probe, row, statuses = run_blocked_job(_settings(tmp_path), renew=False)
    assert probe.claimed is not None and probe.claimed["resumed"] is True  # the probe would have taken it
    assert row["status"] == "running" and row["runs"] == 2  # the blocked run stopped: its claim was lost
    assert statuses == ["queued", "running", "running"]


@pytest.mark.slow
@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_a_job_blocking_its_loop_past_stale_after_is_not_taken_over_postgresql(tmp_path: Path) -> None:
    pytest.importorskip("asyncpg", reason="asyncpg (the [server] extra) is not installed")
    server = PostgresServer(tmp_path / "pg", free_port())
    url = server.start()
    try:
        _assert_kept(*run_blocked_job(_settings(tmp_path, url)))
    finally:
        server.stop()


class WaitingRunner(Runner):
    """A runner whose job waits (on the loop, without blocking it) until the runner stops."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.started = asyncio.Event()

    async def _execute(self, job: dict[str, Any], progress: Any) -> tuple[Path, str | None]:
        self.started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_a_stopping_runner_hands_its_interrupted_jobs_back_at_once_sqlite(tmp_path: Path) -> None:
    settings = Settings.model_validate({"data_dir": str(tmp_path / "data"), "runner": {
        "jobs": 1, "poll_s": 0.05, "heartbeat_s": 0.1, "stale_after_s": 3600},
        "judge_profiles": {"sim": {"model": "simulated-judge", "simulated": {}}}})

    async def main() -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
        storage = await Storage.open(settings)
        try:
            job_id = jobs.new_id()
            await jobs.create_job(storage.engine, job_id=job_id, tenant="t", kind="eval", request={},
                                  request_hash="h", idempotency_key=None, judge_profile="sim", n_outputs=1)
            runner, stop = WaitingRunner(storage.engine, settings), asyncio.Event()
            task = asyncio.create_task(runner.run(stop))
            await asyncio.wait_for(runner.started.wait(), 120)
            held = await jobs.claim(storage.engine, "probe", 3600)  # a live claim: not for the taking
            stop.set()
            await task
            return held, await jobs.claim(storage.engine, "probe", 3600)
        finally:
            await storage.close()

    held, taken = asyncio.run(main())
    assert held is None
    assert taken is not None and taken["resumed"] is True  # at once, not after an hour of stale_after_s
