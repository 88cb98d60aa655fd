"""Pacing and resilience pieces with fake clocks: token buckets, adaptive concurrency, Retry-After, outages."""

from __future__ import annotations

import asyncio
import random

from open_rag_eval.judge.limits import AdaptiveConcurrency, OutageBreaker, RetryPolicy, TokenBucket, parse_retry_after


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        await asyncio.sleep(0)


def _grant_times(bucket: TokenBucket, time: FakeTime, amounts: list[float]) -> list[float]:
    async def main() -> list[float]:
        granted = []
        for amount in amounts:
            await bucket.acquire(amount)
            granted.append(round(time.now, 6))
        return granted

    return asyncio.run(main())


def test_request_bucket_grants_at_the_configured_rate() -> None:
    time = FakeTime()
    bucket = TokenBucket(120, burst_s=1.0, clock=time.clock, sleep=time.sleep)  # 2/s, burst of 2
    assert _grant_times(bucket, time, [1] * 6) == [0.0, 0.0, 0.5, 1.0, 1.5, 2.0]


def test_token_bucket_paces_large_requests_through_debt_and_refunds() -> None:
    time = FakeTime()
    bucket = TokenBucket(6000, burst_s=1.0, clock=time.clock, sleep=time.sleep)  # 100 tokens/s, capacity 100
    assert _grant_times(bucket, time, [300, 50]) == [0.0, 2.5]  # 300 leaves a debt of 200: 2.5 s for 50 more
    bucket.adjust(-30)  # the requests used 30 tokens fewer than estimated: 70 to wait for, not 100
    assert _grant_times(bucket, time, [100]) == [3.2]


def test_adaptive_concurrency_halves_once_per_cooldown_and_recovers() -> None:
    time = FakeTime()
    limit = AdaptiveConcurrency(8, cooldown_s=1.0, clock=time.clock)

    async def main() -> list[int]:
        seen = []
        limit.rate_limited()
        limit.rate_limited()  # the same burst of 429s: no second cut
        seen.append(limit.limit)
        time.now = 2.0
        limit.rate_limited()
        seen.append(limit.limit)
        for _ in range(2):
            await limit.succeeded()
        seen.append(limit.limit)
        for _ in range(3 + 4 + 5 + 6 + 7 + 10):
            await limit.succeeded()
        seen.append(limit.limit)
        return seen

    assert asyncio.run(main()) == [4, 2, 3, 8]


def test_adaptive_concurrency_can_be_switched_off() -> None:
    limit = AdaptiveConcurrency(8, adaptive=False)
    limit.rate_limited()
    assert limit.limit == 8


def test_concurrency_never_exceeds_the_limit() -> None:
    limit = AdaptiveConcurrency(3)

    async def worker() -> None:
        await limit.acquire()
        await asyncio.sleep(0)
        await limit.release()

    async def main() -> None:
        await asyncio.gather(*(worker() for _ in range(20)))

    asyncio.run(main())
    assert (limit.max_in_flight, limit.in_flight) == (3, 0)


def test_parse_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412480.0) == 10.0
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, now=1445412500.0) == 0.0
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({}) is None


def test_retry_delay_full_jitter_and_server_wins() -> None:
    policy = RetryPolicy(base_s=1.0, cap_s=5.0, retry_after_cap_s=60.0, rng=random.Random(0))
    delays = [policy.delay(retry) for retry in range(6)]
    assert all(0 <= d <= min(5.0, 2**i) for i, d in enumerate(delays))
    assert policy.delay(0, retry_after=30.0) == 30.0
    assert policy.delay(0, retry_after=600.0) == 60.0


def test_outage_breaker_by_count_and_by_time() -> None:
    breaker = OutageBreaker(after_failures=3, after_s=100.0)
    breaker.failure("a")
    breaker.failure("b")
    breaker.success()
    breaker.failure("c")
    breaker.failure("d")
    assert not breaker.tripped
    breaker.failure("e")
    assert breaker.tripped and breaker.reason is not None and breaker.reason.endswith("last error: e")

    time = FakeTime()
    timed = OutageBreaker(after_failures=3, after_s=60.0, clock=time.clock)
    timed.failure("x")
    time.now = 61.0
    timed.failure("y")
    time.now = 100.0
    timed.failure("z")  # three failures, but "x" left the window: no outage
    assert not timed.tripped and timed.consecutive == 2
    time.now = 120.0
    timed.failure("w")  # y, z, w within 60 s with no success
    assert timed.tripped and "3 judge calls failed within 59s" in (timed.reason or "")
    timed.success()
    assert timed.tripped  # stays down once decided


def test_outage_breaker_forgets_failures_spread_over_a_long_run() -> None:
    """One failure every 6 minutes for hours is not an outage (the old breaker, timed from the first failure of
    an unbroken streak, stopped such a run)."""
    time = FakeTime()
    breaker = OutageBreaker(after_failures=10, after_s=300.0, clock=time.clock)
    for minute in range(0, 600, 6):
        time.now = minute * 60.0 + 1
        breaker.failure("timed out")
    assert not breaker.tripped and breaker.consecutive == 1


def test_a_cancelled_waiter_does_not_swallow_the_freed_slot() -> None:
    limit = AdaptiveConcurrency(1)

    async def main() -> bool:
        await limit.acquire()
        first = asyncio.create_task(limit.acquire())
        second = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0)
        await limit.release()  # wakes `first` ...
        first.cancel()  # ... which is cancelled before it runs
        await asyncio.wait_for(second, timeout=5)
        return first.cancelled() and limit.in_flight == 1

    assert asyncio.run(main())


def test_waiters_are_served_by_priority_then_arrival_and_cancelled_ones_skipped() -> None:
    from open_rag_eval.judge.limits import AdaptiveConcurrency

    async def scenario() -> list[str]:
        gate = AdaptiveConcurrency(1, adaptive=False)
        await gate.acquire()  # the one slot is taken
        served: list[str] = []

        async def wait(name: str, priority: int) -> None:
            await gate.acquire(priority)
            served.append(name)
            await gate.release()

        tasks = {name: asyncio.create_task(wait(name, prio))
                 for name, prio in [("leaf", 2), ("start-a", 0), ("chain", 1), ("start-b", 0), ("gone", 0)]}
        await asyncio.sleep(0)  # everyone queues
        tasks["gone"].cancel()
        await asyncio.sleep(0)
        await gate.release()
        await asyncio.gather(*(t for name, t in tasks.items() if name != "gone"))
        assert gate.in_flight == 0
        return served

    assert asyncio.run(scenario()) == ["start-a", "start-b", "chain", "leaf"]


def test_timeouts_cut_once_per_wave_of_requests_then_the_limit_recovers() -> None:
    """A timeout speaks of the load when its request was sent: the 8 timeouts of one wave cut once (8 -> 4); a
    timeout of a request sent after that cut cuts again; successes bring the limit back."""
    time = FakeTime()
    limit = AdaptiveConcurrency(8, clock=time.clock)
    time.now = 10.0
    for _ in range(8):
        limit.overloaded("timed out", started=1.0)
    assert limit.limit == 4
    time.now = 20.0
    limit.overloaded("timed out", started=5.0)  # sent before the cut at t=10: old news
    assert limit.limit == 4
    limit.overloaded("timed out", started=12.0)  # sent under the lowered limit, and still too slow
    assert limit.limit == 2

    async def succeed(n: int) -> None:
        for _ in range(n):
            await limit.succeeded()

    asyncio.run(succeed(2 + 3 + 4 + 5 + 6 + 7))
    assert limit.limit == 8
