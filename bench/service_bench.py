"""The evaluation service under load: concurrent clients submit small jobs to a real ``serve`` process (SQLite,
the simulated judge) and poll them.

Prints jobs/s (first submit to last completion), the p50/p99 latency of ``GET /v1/jobs/{id}`` measured while jobs
run, and checks that every job completed exactly once (one ``running`` event per job, every job ``completed``).

    python bench/service_bench.py --clients 20 --jobs 200 --runner-jobs 4
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

log = logging.getLogger("service_bench")


def _outputs(n: int, seed: int) -> str:
    lines = []
    for i in range(n):
        docs = [{"id": f"d{j}", "text": f"Fact {j} about subject {seed}-{i}."} for j in range(3)]
        lines.append(json.dumps({"query_id": f"q{i}", "query": f"What about subject {seed}-{i}?", "run": 1,
                                 "passages": docs, "answer": [{"text": f"Subject {seed}-{i}.", "citations": ["d0"]}]}))
    return "\n".join(lines) + "\n"


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start(folder: Path, runner_jobs: int, latency_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    settings = {"data_dir": "data", "judge_profiles": {"sim": {"model": "simulated-judge",
                                                               "simulated": {"latency_ms": latency_ms}}},
                "runner": {"jobs": runner_jobs, "poll_s": 0.05, "heartbeat_s": 1.0},
                "limits": {"max_active_jobs": 100_000}}
    (folder / "server.yaml").write_text(yaml.safe_dump(settings))
    port = _port()
    with (folder / "serve.log").open("wb") as handle:
        process = subprocess.Popen([sys.executable, "-m", "open_rag_eval", "-q", "serve", "--config",
                                    str(folder / "server.yaml"), "--port", str(port)], stdout=handle,
                                   stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"the server did not start; see {folder / 'serve.log'}")


async def _client(url: str, index: int, n_jobs: int, outputs: int, latencies: list[float],
                  running: dict[str, str]) -> list[str]:
    import httpx

    body = {"config": {"evaluators": [{"type": "trec", "metrics": ["umbrela", "citation", "no_answer"]}]},
            "judge_profile": "sim"}
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        ids = []
        for k in range(n_jobs):
            reply = await client.post("/v1/jobs", json={**body, "inputs": {"format": "jsonl",
                                                                         "data": _outputs(outputs, index * 1000 + k)}})
            reply.raise_for_status()
            ids.append(reply.json()["id"])
            running[ids[-1]] = "queued"
        pending = set(ids)
        while pending:
            for job in sorted(pending):
                started = time.perf_counter()
                reply = await client.get(f"/v1/jobs/{job}")
                elapsed = time.perf_counter() - started
                status = reply.json()["status"]
                if any(s == "running" for s in running.values()):
                    latencies.append(elapsed)
                running[job] = status
                if status in ("completed", "failed", "cancelled"):
                    pending.discard(job)
            await asyncio.sleep(0.05)
        return ids


async def _once_each(url: str, ids: list[str]) -> tuple[int, int]:
    """(jobs started exactly once, jobs completed): from each job's event stream."""
    import httpx

    once = completed = 0
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        for job in ids:
            text = (await client.get(f"/v1/jobs/{job}/events")).text
            statuses = [json.loads(line[6:]).get("status") for line in text.splitlines()
                        if line.startswith("data: ") and '"status"' in line and '"stages"' not in line]
            once += statuses.count("running") == 1
            completed += statuses[-1:] == ["completed"]
    return once, completed


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def _bench(url: str, clients: int, jobs: int, outputs: int) -> dict[str, Any]:
    latencies: list[float] = []
    running: dict[str, str] = {}
    shares = [jobs // clients + (1 if i < jobs % clients else 0) for i in range(clients)]
    started = time.perf_counter()
    per_client = await asyncio.gather(*(_client(url, i, n, outputs, latencies, running)
                                        for i, n in enumerate(shares)))
    wall = time.perf_counter() - started
    ids = [job for group in per_client for job in group]
    once, completed = await _once_each(url, ids)
    return {"jobs": len(ids), "distinct": len(set(ids)), "completed": completed, "started_once": once,
            "wall_s": wall, "jobs_per_s": len(ids) / wall, "gets_while_running": len(latencies),
            "get_p50_ms": 1000 * _percentile(latencies, 0.5) if latencies else None,
            "get_p99_ms": 1000 * _percentile(latencies, 0.99) if latencies else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--outputs", type=int, default=2, help="outputs per job")
    parser.add_argument("--runner-jobs", type=int, default=4, help="jobs the server runs at once")
    parser.add_argument("--latency-ms", type=float, default=5.0, help="the simulated judge's latency")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="service-bench-") as tmp:
        process, url = _start(Path(tmp), args.runner_jobs, args.latency_ms)
        try:
            figures = asyncio.run(_bench(url, args.clients, args.jobs, args.outputs))
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(60)
    log.info("%d clients, %d jobs of %d outputs (trec: umbrela, citation, no_answer), %d run at once, simulated "
             "judge %g ms, SQLite", args.clients, figures["jobs"], args.outputs, args.runner_jobs, args.latency_ms)
    log.info("throughput: %.2f jobs/s (%.1f s from the first submit to the last completion)", figures["jobs_per_s"],
             figures["wall_s"])
    log.info("GET /v1/jobs/{id} while jobs run: p50 %.1f ms, p99 %.1f ms (%d requests)", figures["get_p50_ms"] or 0,
             figures["get_p99_ms"] or 0, figures["gets_while_running"])
    exact = figures["distinct"] == figures["jobs"] == figures["completed"] == figures["started_once"]
    log.info("every job completed exactly once: %s (%d distinct ids, %d completed, %d started once)",
             "yes" if exact else "NO", figures["distinct"], figures["completed"], figures["started_once"])
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
