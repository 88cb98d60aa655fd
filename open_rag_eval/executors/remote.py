"""The shared pieces of a Ray run, and their worker-side faces.

``Budget`` (one named actor per judge endpoint) holds the endpoint's whole budget: the adaptive concurrency limit
(halved by a 429 or a timeout anywhere, recovered by successes everywhere) and the RPM / TPM rates. Each worker's
``SharedLimiter`` is an ordinary ``Limiter`` whose concurrency and rates are its share of that budget: it reports
its demand (calls in flight and waiting), its successes and its overloads every ``SYNC_S`` (at once when it waits
or is overloaded), and takes back its share. Calls are never paced through the actor one by one: the hot path stays
in the worker, and the shares of busy workers add up to the budget.

``CacheOwner`` (one actor, on the driver's machine) owns the run's SQLite judge cache. Each worker's
``RemoteCache`` (``executors.relay``) batches its gets and puts (a few milliseconds' worth per actor call). A put is
awaited before the judge returns the completion, so a judgment a worker finished is in the cache even if the worker
dies right after.

``ShardWorker`` evaluates shards with the normal async core (``shards.evaluate_shard``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.config import LoadedConfig
from open_rag_eval.executors.relay import RemoteCache
from open_rag_eval.judge.cache import CachedCompletion, JudgeCache
from open_rag_eval.judge.limits import AdaptiveConcurrency, Limiter, TokenBucket

__all__ = ["SYNC_S", "Budget", "CacheOwner", "SharedLimiter", "ShardWorker", "split"]

log = logging.getLogger("open_rag_eval.executors")

SYNC_S = 0.05  # how often a worker reports to its budget
IDLE_S = 5.0  # a worker not heard from for this long has no share


def split(limit: int, demands: dict[str, int]) -> dict[str, int]:
    """``limit`` slots shared by demand (water-filling): a worker wanting less than an equal share gets what it
    wants, the others split the rest equally (at least 1 each while they want any)."""
    shares: dict[str, int] = {w: 0 for w, d in demands.items() if d <= 0}
    todo = {w: d for w, d in demands.items() if d > 0}
    while todo:
        fair = (limit - sum(shares.values())) // len(todo)
        small = {w: d for w, d in todo.items() if d <= fair}
        if not small:
            break
        shares.update(small)
        for w in small:
            del todo[w]
    rest = max(0, limit - sum(shares.values()))
    for i, w in enumerate(sorted(todo)):
        shares[w] = max(1, rest // len(todo) + (i < rest % len(todo)))
    return shares


class Budget:
    """One endpoint's judge budget for every worker (a Ray actor; see the module docstring)."""

    def __init__(self, maximum: int, requests_per_minute: float | None, tokens_per_minute: float | None,
                 adaptive: bool = True) -> None:
        self.concurrency = AdaptiveConcurrency(maximum, adaptive=adaptive)
        self.rpm, self.tpm = requests_per_minute, tokens_per_minute
        self.workers: dict[str, tuple[int, float]] = {}  # worker -> (demand, last heard)
        self.granted: dict[str, tuple[int, float | None, float | None]] = {}  # worker -> its share when last heard
        self.overloads = 0

    async def sync(self, worker: str, demand: int, successes: int, overloads: Sequence[tuple[str, float | None]]
                   ) -> tuple[int, float | None, float | None, int]:
        """Record a worker's news; its share: (concurrency, requests/min, tokens/min, the whole limit now)."""
        now = time.monotonic()
        for reason, age in overloads:  # age: seconds since the overloaded request was sent (None: a 429)
            self.overloads += 1
            self.concurrency.overloaded(reason, None if age is None else now - age)
        for _ in range(successes):
            await self.concurrency.succeeded()
        self.workers[worker] = (demand, now)
        live = {w: d for w, (d, seen) in self.workers.items() if now - seen < IDLE_S}
        limit = self.concurrency.limit
        targets = split(limit, live)
        total = sum(targets.values())
        # a share grows only into what the others do not hold: until a worker hears of its smaller share (at its
        # next report), the others wait for their larger one, so the grants never add up to more than the budget
        others = [g for w, g in self.granted.items() if w != worker and w in live]
        share = min(targets.get(worker, 0), max(0, limit - sum(g[0] for g in others)))
        rates: list[float | None] = []
        for index, whole in ((1, self.rpm), (2, self.tpm)):
            free = whole - sum(g[index] or 0.0 for g in others) if whole else 0.0
            rates.append(min(whole * share / total, max(0.0, free)) if whole and total else None)
        if any(rate is not None and rate <= 0 for rate in rates):
            share = 0  # no rate to spend yet: no slot either
        if share == 0:
            rates = [0.0 if whole else None for whole in (self.rpm, self.tpm)]
        self.granted[worker] = (share, rates[0], rates[1])
        return share, rates[0], rates[1], limit

    def state(self) -> dict[str, Any]:
        return {"limit": self.concurrency.limit, "maximum": self.concurrency.maximum, "overloads": self.overloads,
                "workers": {w: d for w, (d, _) in self.workers.items()}}


class SharedLimiter:
    """A worker's share of a ``Budget`` (the ``JudgeLimiter`` interface the judge client paces through)."""

    def __init__(self, budget: Any, worker: str, *, requests_per_minute: float | None = None,
                 tokens_per_minute: float | None = None) -> None:
        self.budget, self.worker = budget, worker
        self.local = Limiter(AdaptiveConcurrency(0, adaptive=False),
                             TokenBucket(requests_per_minute) if requests_per_minute else None,
                             TokenBucket(tokens_per_minute) if tokens_per_minute else None)
        self.waiting = self.successes = 0
        self.overloads: list[tuple[str, float | None]] = []
        self.budget_limit = 0
        self._kick: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def concurrency(self) -> AdaptiveConcurrency:
        return self.local.concurrency

    @contextlib.asynccontextmanager
    async def slot(self, estimated_tokens: int = 0, priority: int = 0) -> AsyncIterator[None]:
        self._start()
        self.waiting += 1
        waiting = True
        if self.concurrency.in_flight >= self.concurrency.limit:
            self._wake()
        try:
            async with self.local.slot(estimated_tokens, priority):
                self.waiting -= 1
                waiting = False
                yield
        finally:
            if waiting:
                self.waiting -= 1

    async def succeeded(self) -> None:
        self.successes += 1

    def overloaded(self, reason: str, started: float | None = None) -> None:
        age = None if started is None else max(0.0, time.monotonic() - started)
        self.overloads.append((reason, age))
        concurrency = self.concurrency  # slow down here at once; the budget's answer follows
        concurrency.limit = max(1, concurrency.limit // 2) if concurrency.limit else 0
        self._wake()

    def used_tokens(self, estimated: int, actual: int) -> None:
        self.local.used_tokens(estimated, actual)

    # -- syncing with the budget -------------------------------------------------------------------------

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._kick = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._sync_loop())

    def _wake(self) -> None:
        if self._kick is not None:
            self._kick.set()

    async def sync(self) -> None:
        successes, overloads = self.successes, self.overloads
        self.successes, self.overloads = 0, []
        demand = self.concurrency.in_flight + self.waiting
        share, rpm, tpm, self.budget_limit = await self.budget.sync.remote(self.worker, demand, successes, overloads)
        self._apply(share, rpm, tpm)

    def _apply(self, share: int, rpm: float | None, tpm: float | None) -> None:
        concurrency = self.concurrency
        concurrency.maximum = concurrency.limit = share
        concurrency._wake()  # waiters take the new slots
        if share:  # an idle worker keeps its last rates until it has work again
            for bucket, rate in ((self.local.requests, rpm), (self.local.tokens, tpm)):
                if bucket is not None and rate:
                    bucket.rate = rate / 60.0
                    bucket.capacity = max(1.0, bucket.rate)  # a second's worth, as TokenBucket's default burst
                    bucket._level = min(bucket._level, bucket.capacity)  # no burst beyond this worker's share

    async def _sync_loop(self) -> None:
        assert self._kick is not None
        while True:
            try:
                await self.sync()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # the budget actor is gone: keep the last share, say so once
                log.warning("judge budget unreachable (%s); keeping this worker's last share", error)
                await asyncio.sleep(1.0)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), SYNC_S)
            self._kick.clear()

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class CacheOwner:
    """The run's judge cache, owned by one actor on the driver's machine."""

    def __init__(self, path: str) -> None:
        self.cache = JudgeCache(Path(path))

    def get_many(self, keys: Sequence[str]) -> list[CachedCompletion | None]:
        return [self.cache.get_sync(key) for key in keys]

    def put_many(self, items: Sequence[tuple[str, CachedCompletion]]) -> None:
        for key, entry in items:
            self.cache.put_sync(key, entry)

    def count(self) -> int:
        return len(self.cache)

    def close(self) -> None:
        self.cache.close()


class ShardWorker:
    """Evaluates shards (a Ray actor): its own judge client per shard, the shared budget and cache."""

    def __init__(self, name: str, budgets: Sequence[str], cache_owner: str | None, relays: Sequence[str] = ()
                 ) -> None:
        # the shared actors by name, looked up at the first shard: a restarted worker finds them the same way
        self.name, self.budget_names, self.cache_name = name, list(budgets), cache_owner
        self.relay_names = list(relays)
        self.limiters: list[SharedLimiter] = []  # one per judge endpoint: each call goes to the least loaded
        self.cache: RemoteCache | None = None
        self.relays: Any = None  # the relays' client (executors.relay), when the run has relays

    def pid(self) -> int:
        return os.getpid()

    async def run(self, loaded: LoadedConfig, outputs: Sequence[Any], index: int) -> Any:
        from open_rag_eval.executors.shards import evaluate_shard, needs_judge
        from open_rag_eval.run.session import judge_session

        if not needs_judge(loaded.evaluators):
            return await evaluate_shard(loaded, outputs, None, index)
        import ray

        judge_config = loaded.judge
        if self.cache is None and self.cache_name is not None:
            self.cache = RemoteCache(ray.get_actor(self.cache_name))
        if not self.limiters:
            self.limiters = [SharedLimiter(ray.get_actor(name), f"{self.name}:{os.getpid()}",
                                           requests_per_minute=judge_config.requests_per_minute,
                                           tokens_per_minute=judge_config.tokens_per_minute)
                             for name in self.budget_names]
        if self.relays is None and self.relay_names:
            from open_rag_eval.executors.relay import RelayClient

            self.relays = RelayClient([ray.get_actor(name) for name in self.relay_names],
                                      f"{self.name}:{os.getpid()}")
        shared: dict[str, Any] = {"limiters": self.limiters}
        if self.cache is not None:
            shared["cache"] = self.cache
        async with judge_session(judge_config, loaded.base_dir, str(loaded.path or ""), **shared) as judge:
            if self.relays is not None:
                from open_rag_eval.executors.relay import attach

                attach(judge, self.relays)
            return await evaluate_shard(loaded, outputs, judge, index)
