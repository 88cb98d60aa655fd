"""One judge budget per deployment: slots and rate buckets in the service's database hold across every process.

Unit level on SQLite (two budgets on one database stand for two processes: each has its own in-process queue);
server level on PostgreSQL: two workers running three jobs each never put more requests in flight at a loopback
judge than the profile's ``max_concurrency``."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

pytest.importorskip("aiosqlite", reason="the [server] extra is not installed")

from open_rag_eval.judge.limits import Limiter  # noqa: E402
from open_rag_eval.service.budget import BudgetedLimiter, DeploymentBudget, Rates  # noqa: E402
from open_rag_eval.service.db import judge_slots, migrate, open_engine  # noqa: E402


async def _engine(tmp_path: Path) -> Any:
    engine = open_engine(f"sqlite+aiosqlite:///{tmp_path / 'service.sqlite'}")
    await migrate(engine)
    return engine


def test_two_processes_budgets_never_hold_more_slots_than_the_profile_allows(tmp_path: Path) -> None:
    async def main() -> tuple[int, int]:
        engine = await _engine(tmp_path)
        budgets = [DeploymentBudget(engine, "p#0", Rates(3, None, None), 30.0) for _ in range(2)]
        held = peak = 0

        async def call(budget: DeploymentBudget) -> None:
            nonlocal held, peak
            token = await budget.enter()
            held += 1
            peak = max(peak, held)
            await asyncio.sleep(0.01)
            held -= 1
            await budget.leave(token)

        await asyncio.gather(*(call(budgets[i % 2]) for i in range(40)))
        async with engine.connect() as connection:
            taken = (await connection.execute(sa.select(sa.func.count()).select_from(judge_slots).where(
                judge_slots.c.holder.is_not(None)))).scalar_one()
        for budget in budgets:
            await budget.close()
        await engine.dispose()
        return peak, taken

    peak, taken = asyncio.run(main())
    assert peak == 3  # reached and never passed
    assert taken == 0  # every slot given back


def test_a_dead_processes_lease_runs_out(tmp_path: Path) -> None:
    async def main() -> list[int]:
        engine = await _engine(tmp_path)
        dead = DeploymentBudget(engine, "p#0", Rates(2, None, None), 0.3)
        await dead.enter()
        await dead.enter()
        await dead.close()  # it never renews nor gives back: its process died
        alive = DeploymentBudget(engine, "p#0", Rates(2, None, None), 30.0)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(alive.enter(), 0.1)  # both slots still leased
        token = await asyncio.wait_for(alive.enter(), 30)  # ... until the lease runs out
        slots = [alive.held[token]]
        await alive.close()
        await engine.dispose()
        return slots

    assert asyncio.run(main())[0] in (0, 1)


def test_the_request_bucket_is_shared(tmp_path: Path) -> None:
    async def main() -> None:
        engine = await _engine(tmp_path)
        one, two = (DeploymentBudget(engine, "p#0", Rates(4, 60.0, None), 30.0) for _ in range(2))
        await one.draw("requests", 1)  # the bucket holds one second's worth: one request at 60/min
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(two.draw("requests", 1), 0.3)  # the other process waits for the refill
        started = time.monotonic()
        await two.draw("requests", 1)
        assert time.monotonic() - started < 30
        await engine.dispose()

    asyncio.run(main())


def test_the_limiter_holds_the_jobs_own_limiter_then_the_deployments_slot(tmp_path: Path) -> None:
    from open_rag_eval.judge.limits import Limiter

    async def main() -> tuple[int, int]:
        engine = await _engine(tmp_path)
        budget = DeploymentBudget(engine, "p#0", Rates(2, None, None), 30.0)
        limiters = [BudgetedLimiter(Limiter.create(8), budget, "p#0") for _ in range(3)]  # three jobs of 8 each

        async def call(limiter: BudgetedLimiter) -> None:
            async with limiter.slot(10):
                await asyncio.sleep(0.01)
            await limiter.succeeded()
            limiter.used_tokens(10, 12)

        await asyncio.gather(*(call(limiters[i % 3]) for i in range(30)))
        await budget.close()
        await engine.dispose()
        return budget.max_in_flight, limiters[0].concurrency.max_in_flight

    budget_peak, job_peak = asyncio.run(main())
    assert budget_peak == 2 and job_peak <= 8  # a job waits for the deployment inside its own slot


def test_on_sqlite_the_budget_is_the_one_processs_and_writes_nothing(tmp_path: Path) -> None:
    from open_rag_eval.service.budget import ProcessBudget, budgets_for

    async def main() -> tuple[int, int, int]:
        engine = await _engine(tmp_path)
        budgets = budgets_for(engine, "p", {"model": "m", "max_concurrency": 2}, 30.0)
        assert [type(b) for b in budgets] == [ProcessBudget]
        limiters = [BudgetedLimiter(Limiter.create(8), budgets[0], "p#0") for _ in range(3)]

        async def call(limiter: BudgetedLimiter) -> None:
            async with limiter.slot(10):
                await asyncio.sleep(0.01)

        await asyncio.gather(*(call(limiters[i % 3]) for i in range(24)))
        async with engine.connect() as connection:
            rows = (await connection.execute(sa.select(sa.func.count()).select_from(judge_slots))).scalar_one()
        await engine.dispose()
        return budgets[0].max_in_flight, budgets[0].in_flight, rows

    assert asyncio.run(main()) == (2, 0, 0)


@pytest.mark.slow
def test_two_workers_with_three_jobs_each_never_exceed_the_profiles_concurrency(tmp_path: Path) -> None:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
    from tests.postgres_server import PostgresServer, unavailable
    from tests.service_server import Service, free_port, wait_status
    from tests.test_service_api import body, outputs_jsonl
    from tests.test_service_postgres import _stop, _workers

    if unavailable() is not None:
        pytest.skip(str(unavailable()))
    folder = Path(tempfile.mkdtemp(prefix="open-rag-eval-pg-"))
    database = PostgresServer(folder, free_port())
    judge = SimulatedJudgeServer(SimulatedServerConfig(latency_ms=30))
    try:
        url = database.start()
        base_url = judge.start()
        profile = {"model": "simulated-judge", "base_url": base_url, "max_concurrency": 3}
        service = Service(tmp_path, {"database_url": url, "judge_profiles": {"limited": profile},
                                     "runner": {"jobs": 0, "poll_s": 0.1, "heartbeat_s": 0.5},
                                     "limits": {"max_active_jobs": 100}})
        with service:
            client = service.client()
            workers = _workers(service, 2, jobs=3)
            try:
                ids = [client.post("/v1/jobs", json={**body(outputs_jsonl(4).replace("topic", f"topic {i}")),
                                                     "judge_profile": "limited"}).json()["id"] for i in range(6)]
                finished = [wait_status(client, job, ("completed", "failed"), 600) for job in ids]
            finally:
                _stop(workers)
        assert [job["status"] for job in finished] == ["completed"] * 6, [job["error"] for job in finished]
        assert judge.stats.max_in_flight <= 3, judge.stats.max_in_flight
        assert judge.stats.max_in_flight >= 2  # the budget was used, not a single line
    finally:
        judge.stop()
        database.stop()
        shutil.rmtree(folder, ignore_errors=True)
