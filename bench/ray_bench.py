"""Ray executor benchmark: N outputs (default 20,000) against two simulated judge endpoints limited to 32 calls in
flight each, evaluated locally and on Ray with 2 and 4 workers.

Two ``open-rag-eval simulate-judge`` processes are the endpoints (``judge.base_urls``, ``max_concurrency: 32``
each; every judge client, local or Ray, spreads its calls over both). Each configuration runs in a fresh child
process of this script (a fresh cache, so every call is paid) which reports its own wall time, judge calls and
peak RSS (``ru_maxrss`` of the driver process alone, not of Ray's workers or of the endpoints). The results of
every Ray run are checked byte for byte against the local run's.

    python bench/ray_bench.py                                  # 20,000 outputs: local, ray x2, ray x4
    python bench/ray_bench.py --outputs 2000 --workers 2       # a quick run
    python bench/ray_bench.py --outputs 2000 --workers 2 --relays 1   # also with the judge calls made by a relay

``--relays N`` (repeatable) runs each Ray configuration again with ``executor.relays: N`` (every judge call made by
relay actors that outlive the workers), after the run without relays.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from scale_bench import synthetic, write_jsonl  # noqa: E402  (the same seeded outputs as the scale benchmark)


def start_judges(latency_ms: float) -> tuple[list[subprocess.Popen[bytes]], list[str]]:
    from scale_bench import start_judge

    servers, urls = [], []
    for _ in range(2):
        server, url = start_judge(latency_ms, latency_ms / 2)
        servers.append(server)
        urls.append(url)
    return servers, urls


def config(folder: Path, name: str, data: Path, urls: list[str], metrics: str, workers: int, relays: int = 0
           ) -> Path:
    body: dict[str, Any] = {
        "input": str(data), "output_dir": str(folder / name),
        "judge": {"model": "simulated-judge", "base_urls": [{"url": u, "max_concurrency": 32} for u in urls],
                  "max_concurrency": 32, "cache": str(folder / f"{name}-cache.sqlite"),
                  "api_key_env": "OPEN_RAG_EVAL_RAY_BENCH_NO_KEY"},
        "evaluators": [{"type": "trec", "k_values": [1, 3], "metrics": metrics.split(",")}]}
    if workers:
        body["executor"] = {"type": "ray", "workers": workers, "worker_cpus": 0.01, "relays": relays}
    path = folder / f"{name}.json"
    path.write_text(json.dumps(body), encoding="utf-8")  # JSON is YAML
    return path


def one(path: Path) -> None:
    """Child mode: evaluate one config, print {wall_s, calls, peak_mb} as JSON."""
    from open_rag_eval.run import pipeline
    from open_rag_eval.config import load_config
    from open_rag_eval.executors import executor_for

    loaded = load_config(path)
    started = time.monotonic()
    report = pipeline.run(loaded, executor=executor_for(loaded))
    wall = time.monotonic() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"wall_s": wall, "calls": report.manifest["accounting"]["total"]["calls"], "peak_mb": peak_mb}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=int, default=20_000)
    parser.add_argument("--passages", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2, help="runs per query")
    parser.add_argument("--latency-ms", type=float, default=50.0, help="the endpoints' mean latency")
    parser.add_argument("--metrics", default="umbrela,nuggets,citation,no_answer")
    parser.add_argument("--workers", type=int, action="append", help="ray workers (repeatable; default 2 and 4)")
    parser.add_argument("--relays", type=int, action="append", default=[],
                        help="also run each ray configuration with this many relays (repeatable)")
    parser.add_argument("--one", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one is not None:
        one(args.one)
        return
    outputs = synthetic(args.outputs, args.passages, args.runs, seed=0)
    servers, urls = start_judges(args.latency_ms)
    try:
        with tempfile.TemporaryDirectory(prefix="ray-bench-") as folder:
            work = Path(folder)
            write_jsonl(work / "outputs.jsonl", outputs)
            print(f"outputs {len(outputs)} ({args.runs} runs a query, {args.passages} passages), metrics "
                  f"{args.metrics}, 2 endpoints x 32 in flight, latency {args.latency_ms:g} ms", flush=True)
            local = None
            runs = [(0, 0), *((w, r) for w in args.workers or [2, 4] for r in [0, *args.relays])]
            for workers, relays in runs:
                name = (f"ray{workers}" + (f"-relays{relays}" if relays else "")) if workers else "local"
                path = config(work, name, work / "outputs.jsonl", urls, args.metrics, workers, relays)
                done = subprocess.run([sys.executable, __file__, "--one", str(path)], capture_output=True, text=True)
                if done.returncode != 0:
                    sys.exit(f"{name} failed: {done.stderr[-3000:]}")
                figures = json.loads(done.stdout.strip().splitlines()[-1])
                same = ""
                if workers:
                    same = ", results identical to local: " + str(all(
                        (work / name / f).read_bytes() == (work / "local" / f).read_bytes()
                        for f in ("results.csv", "results.json")))
                else:
                    local = figures
                label = f"ray, {workers} workers" if workers else "local (one process, both endpoints)"
                label += f", {relays} relay(s)" if relays else ""
                print(f"{label}: wall {figures['wall_s']:.1f} s, judge calls {figures['calls']}, "
                      f"{figures['calls'] / figures['wall_s']:.0f} calls/s, driver peak RSS {figures['peak_mb']:.0f} MB"
                      f"{same}", flush=True)
            assert local is not None
    finally:
        for server in servers:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
