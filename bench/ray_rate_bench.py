"""How closely one judge budget holds its rate across Ray workers (``executor: ray``; the ``Budget`` actor and each
worker's ``SharedLimiter``), over windows longer than the unit test can afford.

``--workers`` worker actors take judge slots from one budget of ``--rpm`` requests a minute as fast as it lets them
(each holds its slot 5 ms, like a fast endpoint) for ``--seconds``. The first second (the buckets' initial burst) is
left out; over the rest the bench prints the rate drawn, and the highest and lowest rate over every sliding window of
``--window`` seconds, each against the configured rate.

    python bench/ray_rate_bench.py                                # 2 workers, 1,200 RPM (20/s), 40 s, 10 s windows
    python bench/ray_rate_bench.py --workers 4 --rpm 6000 --window 5
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import time
from typing import Any

import ray

from open_rag_eval.executors.remote import Budget, SharedLimiter


@ray.remote
class Taker:
    """A worker that only takes slots from its share of the budget, stamping each, until the deadline."""

    async def take(self, budget: Any, name: str, rpm: float, until: float) -> list[float]:
        limiter = SharedLimiter(budget, name, requests_per_minute=rpm)
        stamps: list[float] = []

        async def loop() -> None:
            while time.time() < until:
                async with limiter.slot(10):
                    stamps.append(time.time())
                    await asyncio.sleep(0.005)

        await asyncio.gather(*(loop() for _ in range(8)))
        await limiter.aclose()
        return stamps


def windows(stamps: list[float], start: float, end: float, width: float) -> list[float]:
    """Requests a second in every window [t, t + width) inside [start, end], t stepping by 0.1 s."""
    rates, t = [], start
    while t + width <= end:
        rates.append((bisect.bisect_left(stamps, t + width) - bisect.bisect_left(stamps, t)) / width)
        t += 0.1
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rpm", type=float, default=1200.0)
    parser.add_argument("--seconds", type=float, default=40.0)
    parser.add_argument("--window", type=float, default=10.0)
    args = parser.parse_args()
    ray.init(address="local", num_cpus=max(2, args.workers), include_dashboard=False, log_to_driver=False)
    budget = ray.remote(Budget).remote(8 * args.workers, args.rpm, None)
    takers = [Taker.remote() for _ in range(args.workers)]
    ray.get([t.__ray_ready__.remote() for t in takers])
    begin = time.time()
    until = begin + args.seconds
    drawn = ray.get([t.take.remote(budget, f"w{i}", args.rpm, until) for i, t in enumerate(takers)])
    ray.shutdown()
    every = sorted(s for mine in drawn for s in mine)
    start, end = every[0] + 1.0, until
    steady = every[bisect.bisect_left(every, start):bisect.bisect_left(every, end)]
    rate, target = len(steady) / (end - start), args.rpm / 60
    rates = windows(every, start, end, args.window)
    print(f"{args.workers} workers, one budget of {args.rpm:g} RPM ({target:g}/s), {args.seconds:g} s "
          f"(the first second's burst left out)")
    print(f"drawn over {end - start:.1f} s: {rate:.2f}/s ({rate / target - 1:+.1%} of the rate); "
          f"per worker: {', '.join(str(len(mine)) for mine in drawn)}")
    if rates:
        print(f"{args.window:g} s windows ({len(rates)}): highest {max(rates):.2f}/s ({max(rates) / target - 1:+.1%}), "
              f"lowest {min(rates):.2f}/s ({min(rates) / target - 1:+.1%})")


if __name__ == "__main__":
    main()
