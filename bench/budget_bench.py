"""The deployment-wide judge budget on PostgreSQL: jobs/s with 1 and 2 workers, and the most requests the judge saw in
flight at once.

Starts a throwaway PostgreSQL (the machine's server binaries, as the tests do), a loopback simulated judge with a
fixed latency, one ``serve`` replica that only takes requests (``runner.jobs: 0``) and ``--workers`` worker processes
each running ``--jobs-per-worker`` jobs at once; submits ``--jobs`` small jobs (each with its own outputs, so no
judgment is shared through the cache) and waits for all of them. Prints jobs/s (first submit to last completion),
the judge's request count and its maximum in flight, against the profile's ``max_concurrency``.

    python bench/budget_bench.py --workers 1 --jobs 24
    python bench/budget_bench.py --workers 2 --jobs 24
    python bench/budget_bench.py --workers 2 --jobs 24 --budget process   # for comparison: one budget per process
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from service_bench import _outputs  # noqa: E402  (the same small jobs as the service bench)

log = logging.getLogger("budget_bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--jobs-per-worker", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=24)
    parser.add_argument("--outputs", type=int, default=3, help="outputs per job")
    parser.add_argument("--concurrency", type=int, default=4, help="the profile's max_concurrency")
    parser.add_argument("--latency-ms", type=float, default=40.0, help="the loopback judge's latency")
    parser.add_argument("--budget", choices=("deployment", "process"), default="deployment")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")

    import httpx

    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
    from tests.postgres_server import PostgresServer, unavailable
    from tests.service_server import Service, free_port

    if unavailable() is not None:
        raise SystemExit(f"cannot start PostgreSQL here: {unavailable()}")
    pg_folder = Path(tempfile.mkdtemp(prefix="open-rag-eval-pg-"))
    folder = Path(tempfile.mkdtemp(prefix="open-rag-eval-budget-"))
    database = PostgresServer(pg_folder, free_port())
    judge = SimulatedJudgeServer(SimulatedServerConfig(latency_ms=args.latency_ms))
    workers: list[subprocess.Popen[bytes]] = []
    try:
        url = database.start()
        profile = {"model": "simulated-judge", "base_url": judge.start(), "max_concurrency": args.concurrency}
        service = Service(folder, {"database_url": url, "judge_profiles": {"bench": profile},
                                   "runner": {"jobs": 0, "poll_s": 0.05, "heartbeat_s": 1.0,
                                              "judge_budget": args.budget},
                                   "limits": {"max_active_jobs": 100_000}})
        with service:
            for i in range(args.workers):
                with (folder / f"worker{i}.log").open("wb") as handle:
                    workers.append(subprocess.Popen(service.command(
                        "-q", "worker", "--config", str(service.config), "--jobs", str(args.jobs_per_worker)),
                        stdout=handle, stderr=subprocess.STDOUT, env=service.env))
            client = httpx.Client(base_url=service.url, timeout=60)
            time.sleep(3)  # the workers connect and migrate before the clock starts
            started = time.monotonic()
            ids = [client.post("/v1/jobs", json={
                "config": {"evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}, "judge_profile": "bench",
                "inputs": {"format": "jsonl", "data": _outputs(args.outputs, n)}}).json()["id"]
                for n in range(args.jobs)]
            pending = set(ids)
            statuses: dict[str, str] = {}
            while pending:
                for job in list(pending):
                    status = client.get(f"/v1/jobs/{job}").json()["status"]
                    if status in ("completed", "failed", "cancelled"):
                        statuses[job] = status
                        pending.discard(job)
                time.sleep(0.05)
            elapsed = time.monotonic() - started
        failed = sum(1 for s in statuses.values() if s != "completed")
        print(f"budget={args.budget} workers={args.workers} x {args.jobs_per_worker} jobs, {args.jobs} jobs of "
              f"{args.outputs} outputs, judge latency {args.latency_ms:.0f} ms, max_concurrency {args.concurrency}")
        print(f"  {args.jobs / elapsed:.2f} jobs/s ({elapsed:.1f} s), {failed} not completed")
        print(f"  judge: {judge.stats.requests} requests, at most {judge.stats.max_in_flight} in flight "
              f"(limit {args.concurrency})")
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(30)
            except subprocess.TimeoutExpired:
                worker.kill()
        judge.stop()
        database.stop()
        shutil.rmtree(pg_folder, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
