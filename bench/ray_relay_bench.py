"""What it costs to make every judge call outlive the worker that asked it (``executor.relays``): calls made by relay
actors instead of by the workers themselves.

Two worker actors each make N calls with up to ``--in-flight`` at once. A call is a wait of ``--latency-ms`` (the
endpoint's reply time) and a 1 KB reply; no HTTP, so what is measured is the price of the relaying alone.

- ``direct``: each worker waits itself (the default: the worker owns its HTTP calls);
- ``one actor call per call``: each call is an actor call to one relay that waits and returns the reply (the naive
  relay);
- ``relays (batched)``: the real ``executors.relay`` machinery (``RelayClient`` in the workers, ``Relay`` actors
  routed by key) with the HTTP call replaced by the wait: asks batched per relay (one ``submit`` per 3 ms window),
  replies collected in batches (one long-polling ``collect`` a relay at a time); once with ``--relays`` relays
  (repeatable; default 1 and 2).

Prints calls a second for each.

    python bench/ray_relay_bench.py --calls 2000                  # 2 x 2,000 calls, 64 in flight each, 50 ms
    python bench/ray_relay_bench.py --calls 2000 --latency-ms 0   # the relays' own ceiling
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import time
from typing import Any

import ray

from open_rag_eval.executors.relay import Outcome, Relay, RelayClient
from open_rag_eval.judge.transports import Call
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.replies import Judgment, Usage

REPLY = "x" * 1024
JUDGMENT = Judgment(REPLY, REPLY, Usage(10, 2), None, "stop")


@ray.remote(num_cpus=0)
class Naive:
    """Owns the calls: waits for the endpoint's reply and returns it, one actor call per call."""

    async def call(self, latency_s: float) -> str:
        await asyncio.sleep(latency_s)
        return REPLY


class Waiting(Relay):
    """The real relay, whose call is a wait (no endpoint, no cache)."""

    def __init__(self, latency_s: float) -> None:
        super().__init__(JudgeConfig(model="bench", base_url="http://127.0.0.1:9/v1", cache=False), ".")
        self.latency_s = latency_s

    async def _outcome(self, call: Call) -> Outcome:
        self.counts["calls"] += 1
        await asyncio.sleep(self.latency_s)
        return JUDGMENT


@ray.remote(num_cpus=0)
class Worker:
    async def run(self, mode: str, relays: list[Any], calls: int, in_flight: int, latency_s: float, tag: str
                  ) -> float:
        gate = asyncio.Semaphore(in_flight)
        client = RelayClient(relays, tag) if mode == "batched" else None
        prompt = "{}" * 512

        async def one(i: int) -> None:
            async with gate:
                if mode == "direct":
                    await asyncio.sleep(latency_s)
                    _ = REPLY
                elif mode == "naive":
                    await relays[0].call.remote(latency_s)
                else:
                    assert client is not None
                    key = hashlib.sha256(f"{tag}-{i}".encode()).hexdigest()
                    await client.send(Call(key, "umbrela", (("user", prompt),), {}))

        started = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(calls)))
        return time.perf_counter() - started


def measure(mode: str, relays: int, args: argparse.Namespace) -> float:
    latency_s = args.latency_ms / 1000
    actors: list[Any] = []
    if mode == "naive":
        actors = [Naive.options(max_concurrency=10_000).remote()]
    elif mode == "batched":
        actors = [ray.remote(num_cpus=0)(Waiting).options(max_concurrency=10_000).remote(latency_s)
                  for _ in range(relays)]
    workers = [Worker.options(max_concurrency=10_000).remote() for _ in range(2)]
    ray.get([w.run.remote(mode, actors, 10, 10, 0.0, f"warm-{i}") for i, w in enumerate(workers)])  # warm up
    started = time.perf_counter()
    ray.get([w.run.remote(mode, actors, args.calls, args.in_flight, latency_s, f"w{i}")
             for i, w in enumerate(workers)])
    wall = time.perf_counter() - started
    for actor in [*workers, *actors]:
        ray.kill(actor)
    return 2 * args.calls / wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000, help="calls per worker")
    parser.add_argument("--in-flight", type=int, default=64, help="calls in flight per worker")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--relays", type=int, action="append", help="relays (repeatable; default 1 and 2)")
    args = parser.parse_args()
    # address "local": a new instance even while another process runs a Ray cluster on this machine
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    ideal = 2 * args.in_flight / (args.latency_ms / 1000) if args.latency_ms else float("inf")
    print(f"2 workers x {args.calls} calls, {args.in_flight} in flight each, latency {args.latency_ms:g} ms "
          f"(at most {ideal:.0f} calls/s)", flush=True)
    print(f"direct (the worker owns its calls): {measure('direct', 0, args):.0f} calls/s", flush=True)
    print(f"one actor call per call, one relay: {measure('naive', 1, args):.0f} calls/s", flush=True)
    for relays in args.relays or [1, 2]:
        print(f"relays (batched), {relays} relay(s): {measure('batched', relays, args):.0f} calls/s", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
