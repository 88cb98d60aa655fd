"""Timeouts against a slow local server: does the judge client bury it in abandoned requests?

A loopback OpenAI-compatible server shares its compute among the requests it holds, like a local model server on
one GPU: a request arriving while ``n`` others are in flight takes ``work_ms x (n + 1)``, and a request the client
gave up on keeps the server busy until it is done (servers do not notice a closed connection). The judge client
sends ``--requests`` calls with ``max_concurrency`` in flight and ``timeout_s``; the bench prints, with the adaptive
concurrency on and off: judgments that succeeded, calls that failed for good, requests the server processed in all
(every one beyond the successes was abandoned by the client), the most it held at once, the client's final limit
and the wall time.

    python bench/overload_bench.py --requests 200 --concurrency 32 --timeout 2 --work-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from open_rag_eval.core.errors import JudgeError
from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.judge.client import OpenAIJudge
from open_rag_eval.judge.settings import JudgeSettings
from open_rag_eval.judge.limits import AdaptiveConcurrency, Limiter, OutageBreaker, RetryPolicy

REPLY = {"id": "x", "object": "chat.completion", "created": 0, "model": "slow", "system_fingerprint": "fp_slow",
         "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "2"}}],
         "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}}


@dataclass
class Load:
    work_s: float
    in_flight: int = 0
    peak: int = 0
    processed: int = 0


class SlowServer:
    """Latency grows with the load; abandoned requests are still worked on."""

    def __init__(self, work_ms: float) -> None:
        self.load = Load(work_ms / 1000)
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = 0

    def __enter__(self) -> SlowServer:
        self._thread.start()
        self._ready.wait()
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0))
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                await reader.readexactly(length)
                load = self.load
                load.in_flight += 1
                load.peak = max(load.peak, load.in_flight)
                try:
                    await asyncio.sleep(load.work_s * load.in_flight)
                finally:
                    load.in_flight -= 1
                    load.processed += 1
                body = json.dumps(REPLY).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _run(base_url: str, args: argparse.Namespace, adaptive: bool) -> dict[str, Any]:
    limiter = Limiter(AdaptiveConcurrency(args.concurrency, adaptive=adaptive))
    settings = JudgeSettings("slow", (base_url,), api_key="none", timeout_s=args.timeout,
                             retry=RetryPolicy(max_retries=args.retries, base_s=0.2, cap_s=2.0))
    judge = OpenAIJudge(settings, limiters=[limiter], breaker=OutageBreaker(10**9))
    ok = failed = 0
    started = time.monotonic()
    async with judge:
        async def one(i: int) -> None:
            nonlocal ok, failed
            try:
                await judge.complete(JudgeRequest.chat(Tasks.UMBRELA, f"passage {i}"))
                ok += 1
            except JudgeError:
                failed += 1

        await asyncio.gather(*(one(i) for i in range(args.requests)))
    return {"ok": ok, "failed": failed, "wall_s": time.monotonic() - started, "limit": limiter.concurrency.limit}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--timeout", type=float, default=2.0, help="the client's timeout_s")
    parser.add_argument("--work-ms", type=float, default=100.0, help="server time per request, times its load")
    parser.add_argument("--retries", type=int, default=6)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    print(f"{args.requests} requests, max_concurrency {args.concurrency}, timeout {args.timeout:g}s, "
          f"server {args.work_ms:g} ms x load per request")
    print(f"{'adaptive':>8}  {'ok':>5}  {'failed':>6}  {'processed':>9}  {'abandoned':>9}  {'peak held':>9}  "
          f"{'final limit':>11}  {'wall s':>7}")
    for adaptive in (True, False):
        with SlowServer(args.work_ms) as server:
            result = asyncio.run(_run(f"http://127.0.0.1:{server.port}/v1", args, adaptive))
            time.sleep(args.work_ms / 1000 * server.load.peak)  # let the server finish what it still holds
            load = server.load
        print(f"{str(adaptive).lower():>8}  {result['ok']:>5}  {result['failed']:>6}  {load.processed:>9}  "
              f"{load.processed - result['ok']:>9}  {load.peak:>9}  {result['limit']:>11}  {result['wall_s']:>7.1f}")


if __name__ == "__main__":
    main()
