"""Pacing and resilience for judge calls: concurrency (adaptive), RPM/TPM token buckets, retry timing, outages.

All of it is injected into the client as plain objects, so a service can share one ``Limiter`` across jobs.
Clocks and sleeps are injectable, so tests run in milliseconds.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from typing import Protocol

__all__ = ["AdaptiveConcurrency", "JudgeLimiter", "Limiter", "OutageBreaker", "RetryPolicy", "TokenBucket",
           "parse_retry_after"]

log = logging.getLogger("open_rag_eval.judge")

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class TokenBucket:
    """``rate_per_minute`` units refill continuously; at most ``burst_s`` seconds' worth are banked.

    A request larger than the bucket waits for a full bucket and leaves it in debt, so large requests are paced
    too instead of waiting forever.
    """

    def __init__(self, rate_per_minute: float, *, burst_s: float = 1.0, clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep) -> None:
        self.rate = rate_per_minute / 60.0
        self.capacity = max(1.0, self.rate * burst_s)
        self._level = self.capacity
        self._clock, self._sleep = clock, sleep
        self._stamp = clock()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = self._clock()
        self._level = min(self.capacity, self._level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float = 1.0) -> None:
        async with self._lock:  # first come, first served
            need = min(amount, self.capacity)
            self._refill()
            while self._level < need:
                await self._sleep((need - self._level) / self.rate)
                self._refill()
            self._level -= amount

    def adjust(self, amount: float) -> None:
        """Charge (positive) or refund (negative) the difference between an estimate and the real usage."""
        self._refill()
        self._level = min(self.capacity, self._level - amount)


class AdaptiveConcurrency:
    """A semaphore whose limit halves on rate limiting (at most once per ``cooldown_s``) and creeps back up by
    one after ``limit`` consecutive successes, never above ``maximum``."""

    def __init__(self, maximum: int, *, adaptive: bool = True, cooldown_s: float = 1.0,
                 clock: Clock = time.monotonic) -> None:
        self.maximum = self.limit = maximum
        self.adaptive, self.cooldown_s, self._clock = adaptive, cooldown_s, clock
        self.in_flight = self.max_in_flight = 0
        self._successes = 0
        self._last_cut = float("-inf")
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []  # a heap: (priority, arrival, future)
        self._arrivals = itertools.count()

    async def acquire(self, priority: int = 0) -> None:
        """Take a slot; while none is free, waiters are served by priority (lower first), then by arrival."""
        if self.in_flight < self.limit and not self._waiters:
            self._take()
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._arrivals), future))
        try:
            await future
        except asyncio.CancelledError:
            if future.done() and not future.cancelled():  # granted a slot, then cancelled: hand it on
                self._give_back()
            raise

    async def release(self) -> None:
        self._give_back()

    def _give_back(self) -> None:
        self.in_flight -= 1
        self._wake()

    def _take(self) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _wake(self) -> None:
        while self._waiters and self.in_flight < self.limit:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():  # skip waiters that were cancelled while queued
                self._take()
                future.set_result(None)

    def rate_limited(self) -> None:
        self.overloaded("rate limited by the endpoint")

    def overloaded(self, reason: str, started: float | None = None) -> None:
        """Too much at once (a 429, a timeout, a context overflow): halve the limit. A signal about a request sent
        before the last cut (``started``, on this object's clock) is old news and cuts nothing; without
        ``started``, at most one cut per ``cooldown_s``."""
        self._successes = 0
        now = self._clock()
        stale = now - self._last_cut < self.cooldown_s if started is None else started < self._last_cut
        if not self.adaptive or self.limit == 1 or stale:
            return
        self._last_cut = now
        self.limit = max(1, self.limit // 2)
        log.warning("judge: %s; concurrency lowered to %d", reason, self.limit)

    async def succeeded(self) -> None:
        if self.limit >= self.maximum:
            return
        self._successes += 1
        if self._successes >= self.limit:
            self._successes = 0
            self.limit += 1
            self._wake()
            log.debug("judge: concurrency recovered to %d", self.limit)


class JudgeLimiter(Protocol):
    """What the judge client asks of its pacing: ``Limiter`` in one process, or one budget shared by many
    processes (``open_rag_eval.executors``). ``started`` is a ``time.monotonic()`` of the caller's process."""

    def slot(self, estimated_tokens: int = 0, priority: int = 0) -> AbstractAsyncContextManager[None]: ...

    async def succeeded(self) -> None: ...

    def overloaded(self, reason: str, started: float | None = None) -> None: ...

    def used_tokens(self, estimated: int, actual: int) -> None: ...


@dataclass
class Limiter:
    """Concurrency + optional RPM and TPM buckets. ``slot(tokens)`` holds one request's place."""

    concurrency: AdaptiveConcurrency
    requests: TokenBucket | None = None
    tokens: TokenBucket | None = None

    @classmethod
    def create(cls, max_concurrency: int, requests_per_minute: float | None = None,
               tokens_per_minute: float | None = None, *, adaptive: bool = True) -> Limiter:
        return cls(
            AdaptiveConcurrency(max_concurrency, adaptive=adaptive),
            TokenBucket(requests_per_minute) if requests_per_minute else None,
            TokenBucket(tokens_per_minute) if tokens_per_minute else None,
        )

    @asynccontextmanager
    async def slot(self, estimated_tokens: int = 0, priority: int = 0) -> AsyncIterator[None]:
        await self.concurrency.acquire(priority)
        try:
            if self.requests is not None:
                await self.requests.acquire(1)
            if self.tokens is not None:
                await self.tokens.acquire(estimated_tokens)
            yield
        finally:
            await self.concurrency.release()

    async def succeeded(self) -> None:
        await self.concurrency.succeeded()

    def overloaded(self, reason: str, started: float | None = None) -> None:
        """A 429, a timeout or an overflow: the adaptive concurrency halves (``AdaptiveConcurrency.overloaded``)."""
        self.concurrency.overloaded(reason, started)

    def used_tokens(self, estimated: int, actual: int) -> None:
        if self.tokens is not None:
            self.tokens.adjust(actual - estimated)


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms``, or ``Retry-After`` as seconds or an HTTP date; None if absent."""
    lowered = {key.lower(): value for key, value in headers.items()}
    try:
        if "retry-after-ms" in lowered:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        value = lowered.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = parsedate_to_datetime(value).timestamp()
            return max(0.0, when - (time.time() if now is None else now))
    except (TypeError, ValueError, OverflowError):
        return None


@dataclass
class RetryPolicy:
    """Exponential backoff with full jitter; a server's Retry-After wins, capped at ``retry_after_cap_s``."""

    max_retries: int = 6
    base_s: float = 0.5
    cap_s: float = 30.0
    retry_after_cap_s: float = 120.0
    rng: random.Random = field(default_factory=random.Random)

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap_s)
        return self.rng.uniform(0, min(self.cap_s, self.base_s * 2**retry))


class OutageBreaker:
    """Decides that the endpoint is down: ``after_failures`` calls failed (after their retries) within the last
    ``after_s`` seconds with no success since. Older failures drop out of the window, so failures spread thinly
    over a long run never add up to an outage. Once tripped it stays tripped. The client counts only the run's own
    judgments, and only those that failed while no other call succeeded (``judge.client``)."""

    def __init__(self, after_failures: int = 10, after_s: float = 300.0, *, clock: Clock = time.monotonic) -> None:
        self.after_failures, self.after_s, self._clock = after_failures, after_s, clock
        self._recent: deque[float] = deque()  # times of the failures in the window, oldest first
        self.reason: str | None = None
        self.successes = 0  # calls that succeeded, ever: a call that failed while others succeeded is no outage

    @property
    def tripped(self) -> bool:
        return self.reason is not None

    @property
    def consecutive(self) -> int:
        """Failures in the current window with no success since."""
        self._expire(self._clock())
        return len(self._recent)

    def success(self) -> None:
        self.successes += 1
        if not self.tripped:
            self._recent.clear()

    def failure(self, reason: str) -> None:
        now = self._clock()
        self._expire(now)
        self._recent.append(now)
        if len(self._recent) >= self.after_failures:
            self.trip(f"{len(self._recent)} judge calls failed within {now - self._recent[0]:.0f}s with no success; "
                      f"last error: {reason}")

    def _expire(self, now: float) -> None:
        while self._recent and now - self._recent[0] > self.after_s:
            self._recent.popleft()

    def trip(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
            log.error("judge endpoint unavailable: %s", reason)
