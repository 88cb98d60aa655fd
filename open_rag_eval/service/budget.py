"""One judge budget per deployment: a profile's concurrency, RPM and TPM hold across every job, worker and replica.

The budget lives in the service's database, so every process sharing it draws from the same one:

- **Concurrency** is ``max_concurrency`` slot rows per profile endpoint. A call takes a free slot by compare-and-set
  (on PostgreSQL the candidate row is picked ``FOR UPDATE SKIP LOCKED``, so processes take different slots) and gives
  it back when its request ends. A slot is a lease: the holder renews it while the call runs, and a slot whose
  process died frees itself ``stale_after_s`` later.
- **Requests and tokens per minute** are token buckets, one row each, refilled continuously and drawn by
  compare-and-set on a version number; a reply's real token count settles the estimate.

In one process a single waiter polls for a slot at a time (the others queue behind it), so a full budget costs the
database one query per process per poll. ``BudgetedLimiter`` is the judge client's ``JudgeLimiter`` for one
endpoint: the job's own limiter first (its adaptive concurrency), then the deployment's slot and buckets.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from open_rag_eval.service.db import judge_buckets, judge_slots

__all__ = ["BudgetedLimiter", "DeploymentBudget", "ProcessBudget", "budgets_for"]

log = logging.getLogger(__name__)

POLL_S = (0.01, 0.2)  # the first and the longest wait between two looks at a full budget


@dataclass(frozen=True)
class Rates:
    slots: int
    requests_per_minute: float | None
    tokens_per_minute: float | None


class DeploymentBudget:
    """The budget of one profile endpoint (``key``) for every process sharing ``engine``'s database."""

    def __init__(self, engine: AsyncEngine, key: str, rates: Rates, lease_s: float) -> None:
        self.engine, self.key, self.rates, self.lease_s = engine, key, rates, lease_s
        self.held: dict[str, int] = {}  # lease token -> slot
        self.in_flight = self.max_in_flight = 0  # this process's calls holding a slot (for tests and the bench)
        self._turn = asyncio.Lock()
        self._freed = asyncio.Event()
        self._renewer: asyncio.Task[None] | None = None
        self._ready = False

    async def _prepare(self) -> None:
        if self._ready:
            return
        async with self.engine.begin() as connection:
            have = set((await connection.execute(sa.select(judge_slots.c.slot).where(
                judge_slots.c.profile == self.key))).scalars())
            missing = [{"profile": self.key, "slot": n} for n in range(self.rates.slots) if n not in have]
            if missing:  # another process may make them meanwhile
                await connection.execute(_insert_ignore(connection, judge_slots), missing)
        self._ready = True

    async def enter(self) -> str:
        """Take a slot (waiting while every one is held anywhere); returns the lease to give back."""
        await self._prepare()
        self._start_renewing()
        async with self._turn:  # one poller per process
            wait = POLL_S[0]
            while True:
                token = await self._try_take()
                if token is not None:
                    break
                self._freed.clear()
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._freed.wait(), wait * random.uniform(0.5, 1.0))
                wait = min(POLL_S[1], wait * 2)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return token

    async def _try_take(self) -> str | None:
        now = time.time()
        free = sa.or_(judge_slots.c.holder.is_(None), judge_slots.c.expires < now)
        query = sa.select(judge_slots.c.slot).where(judge_slots.c.profile == self.key,
                                                    judge_slots.c.slot < self.rates.slots, free)
        token = secrets.token_hex(8)
        async with self.engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            slot = (await connection.execute(query.order_by(judge_slots.c.slot).limit(1))).scalar()
            if slot is None:
                return None
            taken = await connection.execute(judge_slots.update().where(
                judge_slots.c.profile == self.key, judge_slots.c.slot == slot, free).values(
                holder=token, expires=now + self.lease_s))
        if not taken.rowcount:
            return None
        self.held[token] = slot
        return token

    async def leave(self, token: str) -> None:
        slot = self.held.pop(token, None)
        self.in_flight -= 1
        if slot is None:
            return
        try:
            async with self.engine.begin() as connection:
                await connection.execute(judge_slots.update().where(
                    judge_slots.c.profile == self.key, judge_slots.c.slot == slot, judge_slots.c.holder == token)
                    .values(holder=None, expires=None))
        except Exception as error:  # the lease runs out by itself
            log.warning("judge budget %s: giving back a slot failed: %s", self.key, error)
        self._freed.set()

    def _start_renewing(self) -> None:
        if self._renewer is None or self._renewer.done():
            self._renewer = asyncio.get_running_loop().create_task(self._renew(), name=f"budget {self.key}")

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 4)
            tokens = list(self.held)
            if not tokens:
                continue
            try:
                async with self.engine.begin() as connection:
                    await connection.execute(judge_slots.update().where(
                        judge_slots.c.profile == self.key, judge_slots.c.holder.in_(tokens))
                        .values(expires=time.time() + self.lease_s))
            except Exception as error:
                log.warning("judge budget %s: renewing leases failed: %s", self.key, error)

    async def draw(self, kind: str, amount: float) -> None:
        """Take ``amount`` from the ``requests`` or ``tokens`` bucket, waiting until it holds enough."""
        per_minute = self.rates.requests_per_minute if kind == "requests" else self.rates.tokens_per_minute
        if not per_minute or amount <= 0:
            return
        rate = per_minute / 60.0
        capacity = max(1.0, rate)  # at most one second's worth banked, like the in-process TokenBucket
        need = min(amount, capacity)
        while True:
            level = await self._take(kind, rate, capacity, need, amount)
            if level is None:
                return
            await asyncio.sleep(max(0.005, (need - level) / rate))

    async def _take(self, kind: str, rate: float, capacity: float, need: float, amount: float) -> float | None:
        """None when taken; else the level found (too low)."""
        where = (judge_buckets.c.profile == self.key, judge_buckets.c.kind == kind)
        while True:
            now = time.time()
            async with self.engine.begin() as connection:
                row = (await connection.execute(sa.select(judge_buckets).where(*where))).mappings().first()
                if row is None:
                    await connection.execute(_insert_ignore(connection, judge_buckets).values(
                        profile=self.key, kind=kind, level=capacity, stamp=now, version=0))
                    continue
                stamp = max(now, row["stamp"])
                level = min(capacity, row["level"] + max(0.0, now - row["stamp"]) * rate)
                if level < need:
                    return level
                changed = await connection.execute(judge_buckets.update().where(
                    *where, judge_buckets.c.version == row["version"]).values(
                    level=level - amount, stamp=stamp, version=row["version"] + 1))
                if changed.rowcount:
                    return None

    async def settle(self, kind: str, amount: float) -> None:
        """Charge (positive) or refund (negative) the bucket: a reply's real tokens against the estimate."""
        if not amount or not (self.rates.tokens_per_minute if kind == "tokens" else self.rates.requests_per_minute):
            return
        capacity = max(1.0, (self.rates.tokens_per_minute or 0) / 60.0)
        async with self.engine.begin() as connection:
            await connection.execute(judge_buckets.update().where(
                judge_buckets.c.profile == self.key, judge_buckets.c.kind == kind).values(
                level=sa.case((judge_buckets.c.level - amount > capacity, capacity),
                              else_=judge_buckets.c.level - amount),
                version=judge_buckets.c.version + 1))

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            with contextlib.suppress(BaseException):
                await self._renewer


def _insert_ignore(connection: Any, table: sa.Table) -> Any:
    """An INSERT that skips rows whose key exists (PostgreSQL and SQLite: ON CONFLICT DO NOTHING)."""
    if connection.dialect.name == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table).on_conflict_do_nothing()
    from sqlalchemy.dialects import sqlite

    return sqlite.insert(table).on_conflict_do_nothing()


class BudgetedLimiter:
    """A ``JudgeLimiter``: the job's own limiter, then a slot and the rates of the deployment's budget (none with
    ``runner.judge_budget: process``); each request's duration is observed for ``/metrics`` under ``name``."""

    def __init__(self, inner: Any, budget: DeploymentBudget | ProcessBudget | None, name: str) -> None:
        self.inner, self.budget, self.name = inner, budget, name
        self._pending: set[asyncio.Task[None]] = set()

    def __getattr__(self, name: str) -> Any:  # concurrency, requests, tokens: the job's own limiter's
        return getattr(self.inner, name)

    @contextlib.asynccontextmanager
    async def slot(self, estimated_tokens: int = 0, priority: int = 0) -> AsyncIterator[None]:
        from open_rag_eval.service.metrics import observe_request

        async with self.inner.slot(estimated_tokens, priority):
            token = await self.budget.enter() if self.budget is not None else None
            try:
                if self.budget is not None:
                    await self.budget.draw("requests", 1)
                    await self.budget.draw("tokens", estimated_tokens)
                started = time.monotonic()
                try:
                    yield
                finally:
                    observe_request(self.name, time.monotonic() - started)
            finally:
                if token is not None and self.budget is not None:
                    await asyncio.shield(self.budget.leave(token))

    async def succeeded(self) -> None:
        await self.inner.succeeded()

    def overloaded(self, reason: str, started: float | None = None) -> None:
        self.inner.overloaded(reason, started)

    def used_tokens(self, estimated: int, actual: int) -> None:
        self.inner.used_tokens(estimated, actual)
        if self.budget is not None and actual != estimated and self.budget.rates.tokens_per_minute:
            task = asyncio.get_running_loop().create_task(self.budget.settle("tokens", actual - estimated))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)


class ProcessBudget:
    """The budget of one profile endpoint when the database is an embedded SQLite file: it serves one process, so
    the deployment's budget is this process's (a semaphore and two token buckets shared by every job), and the
    judge's calls add no writes to the file the requests and heartbeats write to."""

    def __init__(self, key: str, rates: Rates) -> None:
        from open_rag_eval.judge.limits import TokenBucket

        self.key, self.rates = key, rates
        self.in_flight = self.max_in_flight = 0
        self._slots = asyncio.Semaphore(rates.slots)
        self._buckets = {kind: TokenBucket(rate) for kind, rate in (
            ("requests", rates.requests_per_minute), ("tokens", rates.tokens_per_minute)) if rate}

    async def enter(self) -> str:
        await self._slots.acquire()
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        return "local"

    async def leave(self, token: str) -> None:
        self.in_flight -= 1
        self._slots.release()

    async def draw(self, kind: str, amount: float) -> None:
        if kind in self._buckets and amount > 0:
            await self._buckets[kind].acquire(amount)

    async def settle(self, kind: str, amount: float) -> None:
        if kind in self._buckets:
            self._buckets[kind].adjust(amount)

    async def close(self) -> None:
        return None


def budgets_for(engine: AsyncEngine, profile: str, section: dict[str, Any], lease_s: float
                ) -> list[DeploymentBudget | ProcessBudget]:
    """The budgets of a judge profile's endpoints, in the order of the judge client's endpoints: rows in the
    database on PostgreSQL (every replica and worker), in this process on SQLite (which serves one process)."""
    from open_rag_eval.judge.config import JudgeConfig

    config = JudgeConfig.model_validate(section)
    limits = [limit for _, limit in config.endpoints()] or [config.max_concurrency]
    rates = [Rates(limit, config.requests_per_minute, config.tokens_per_minute) for limit in limits]
    if engine.dialect.name == "sqlite":
        return [ProcessBudget(f"{profile}#{i}", rate) for i, rate in enumerate(rates)]
    return [DeploymentBudget(engine, f"{profile}#{i}", rate, lease_s) for i, rate in enumerate(rates)]
