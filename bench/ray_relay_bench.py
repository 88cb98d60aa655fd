"""What it would cost to make every judge call outlive the worker that asked it: each call relayed through one
actor (the owner of the HTTP call, which records the reply even if the asking worker died) instead of made by the
worker itself.

Two worker actors each make N calls with up to ``--in-flight`` at once. A call is a wait of ``--latency-ms`` (the
endpoint's reply time) and a 1 KB reply. ``direct``: each worker waits itself (today's design: the worker owns its
HTTP calls). ``relayed``: each call is an actor call to one relay actor that waits and returns the reply (the
design that would survive a worker's death). Prints calls a second for both.

    python bench/ray_relay_bench.py                     # 2 x 4,000 calls, 64 in flight each, 50 ms
    python bench/ray_relay_bench.py --latency-ms 0      # the relay's own ceiling
"""

from __future__ import annotations

import argparse
import asyncio
import time

import ray

REPLY = "x" * 1024


@ray.remote(num_cpus=0)
class Relay:
    """Owns the calls: waits for the endpoint's reply and returns it."""

    async def call(self, latency_s: float) -> str:
        await asyncio.sleep(latency_s)
        return REPLY


@ray.remote(num_cpus=0)
class Worker:
    async def run(self, relay: object, calls: int, in_flight: int, latency_s: float) -> float:
        gate = asyncio.Semaphore(in_flight)

        async def one() -> None:
            async with gate:
                if relay is None:
                    await asyncio.sleep(latency_s)
                    _ = REPLY
                else:
                    await relay.call.remote(latency_s)  # type: ignore[attr-defined]

        started = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(calls)))
        return time.perf_counter() - started


def measure(relayed: bool, args: argparse.Namespace) -> float:
    relay = Relay.options(max_concurrency=10_000).remote() if relayed else None
    workers = [Worker.options(max_concurrency=10_000).remote() for _ in range(2)]
    ray.get([w.run.remote(relay, 10, 10, 0.0) for w in workers])  # warm up: actors started, connections made
    started = time.perf_counter()
    ray.get([w.run.remote(relay, args.calls, args.in_flight, args.latency_ms / 1000) for w in workers])
    wall = time.perf_counter() - started
    for actor in [*workers, *([relay] if relay is not None else [])]:
        ray.kill(actor)
    return 2 * args.calls / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000, help="calls per worker")
    parser.add_argument("--in-flight", type=int, default=64, help="calls in flight per worker")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    args = parser.parse_args()
    # address "local": a new instance even while another process runs a Ray cluster on this machine
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ideal = 2 * args.in_flight / (args.latency_ms / 1000) if args.latency_ms else float("inf")
    print(f"2 workers x {args.calls} calls, {args.in_flight} in flight each, latency {args.latency_ms:g} ms "
          f"(at most {ideal:.0f} calls/s)")
    for relayed in (False, True):
        rate = measure(relayed, args)
        print(f"{'relayed through one actor' if relayed else 'direct (the worker owns its calls)'}: "
              f"{rate:.0f} calls/s")
    ray.shutdown()


if __name__ == "__main__":
    main()
