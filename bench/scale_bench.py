"""Scale benchmark: N RAG outputs (default 10,000) through `open-rag-eval eval` against the simulated judge.

Starts the simulated judge as its own process (``open-rag-eval simulate-judge``, low latency), runs the real CLI as
a child process against it and prints wall time, judge calls, calls/s and the eval child's peak RSS (its rusage,
from ``os.wait4``, the per-child form of ``resource.getrusage(RUSAGE_CHILDREN)``; target <= 1 GB; the simulator's
memory is not counted). Then it evaluates the same outputs again in B smaller batches (separate processes, a separate
cache, so every judgment is asked again) and checks that the concatenated per-output results equal the single run's.

    python bench/scale_bench.py                      # 10,000 outputs, 10 batches
    python bench/scale_bench.py --outputs 500 --batches 4 --metrics umbrela,no_answer   # a quick run
    python bench/scale_bench.py --outputs 10000 --runs 1 --passages 5 --latency-ms 5 --batches 0   # issue 20's run
    python bench/scale_bench.py --outputs 10000 --runs 5 --passages 5 --latency-ms 5 --batches 0   # 2,000 x 5 runs
    python bench/scale_bench.py --issue20      # both of the above, one after the other, then a table of the two
    python bench/scale_bench.py --outputs 100000 --latency-ms 0 --batches 0    # issue 30: memory at 100k
    python bench/scale_bench.py --judge-free --outputs 1000000 --batches 0     # golden and lexical, no judge
    python bench/scale_bench.py --outputs 100000 --latency-ms 0 --batches 0 --tracemalloc top.txt
    python bench/scale_bench.py --judge-free --csv --outputs 100000 --batches 0    # the same outputs as a CSV

``--judge-free`` evaluates with the golden evaluator alone (retrieval metrics against each query's relevant ids,
lexical metrics against its keywords and reference answer; labels in the outputs): no judge is started.
``--tracemalloc FILE`` runs the eval child under ``tracemalloc`` (``bench/traced_eval.py``; several times slower)
and writes to FILE the 10 lines of code holding the most memory when the traced memory was highest.
``--keep DIR`` copies the single run's results.csv, results.json and summary.csv into DIR (to compare two trees'
results byte for byte, e.g. with ``cmp``).

Targets (issue 20): peak RSS <= 600 MB and wall <= 4 min for the 10,000 x 1 run on the 2-core machine class.

With ``--batches 0`` the batch comparison is skipped. After the single run it prints the size of ``report.html``
(and of any files the report wrote next to it), then re-renders the report with ``open-rag-eval report`` as a
child process of its own and prints that child's wall time and peak RSS.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

WORDS = ("solar wind turbine energy grid battery storage carbon emission policy price market coal nuclear hydro "
         "power plant efficiency demand supply climate heat pump electric vehicle charging station network load "
         "forecast tariff subsidy transmission outage capacity reserve frequency voltage").split()


def synthetic(n_outputs: int, passages: int, runs: int, seed: int, labels: bool = False) -> list[dict[str, Any]]:
    """Seeded outputs: ``runs`` runs per query, passages of ~60 words, answers of 3 cited sentences (``labels``:
    with each query's relevant ids, keywords and reference answer, for the golden evaluator)."""
    return list(iter_synthetic(n_outputs, passages, runs, seed, labels))


def iter_synthetic(n_outputs: int, passages: int, runs: int, seed: int, labels: bool = False
                   ) -> Iterator[dict[str, Any]]:
    """``synthetic``, one output at a time."""
    rng = random.Random(seed)
    made = 0
    query_index = 0
    while made < n_outputs:
        topic = rng.sample(WORDS, 3)
        query = f"How does {topic[0]} affect {topic[1]} and {topic[2]}? ({query_index})"
        label = ({"relevant_ids": {str(rng.randint(1, passages)): 1}, "expected_keywords": topic[:2],
                  "reference_answer": " ".join(rng.choices(WORDS + topic, k=12)) + "."} if labels else {})
        for run in range(1, runs + 1):
            if made == n_outputs:
                break
            texts = [" ".join(rng.choices(WORDS + topic * 4, k=60)) + "." for _ in range(passages)]
            sentences = [" ".join(rng.choices(WORDS + topic, k=12)).capitalize() + f" [{rng.randint(1, passages)}]."
                         for _ in range(3)]
            made += 1
            yield {"query_id": f"q{query_index}", "query": query, "run": run,
                   "passages": [{"id": str(i + 1), "text": t} for i, t in enumerate(texts)],
                   "answer": " ".join(sentences), **label}
        query_index += 1


def write_jsonl(path: Path, outputs: Iterable[dict[str, Any]]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for output in outputs:
            handle.write(json.dumps(output) + "\n")


CSV_HEADER = ["query_id", "query", "query_run", "passage_id", "passage", "generated_answer", "relevant_ids",
              "expected_keywords", "reference_answer"]


def write_csv(path: Path, outputs: Iterable[dict[str, Any]]) -> None:
    """The outputs in open-rag-eval's CSV layout: one row per passage, the answer and labels in a run's first row."""
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_HEADER)
        for output in outputs:
            relevant = ";".join(f"{key}:{grade}" for key, grade in output.get("relevant_ids", {}).items())
            labels = [relevant, ";".join(output.get("expected_keywords", [])), output.get("reference_answer", "")]
            for index, passage in enumerate(output["passages"]):
                writer.writerow([output["query_id"], output["query"], output["run"], passage["id"], passage["text"],
                                 *([output["answer"], *labels] if index == 0 else ["", "", "", ""])])


def write_input(path: Path, outputs: Iterable[dict[str, Any]]) -> None:
    (write_csv if path.suffix == ".csv" else write_jsonl)(path, outputs)


def start_judge(latency_ms: float, jitter_ms: float) -> tuple[subprocess.Popen[bytes], str]:
    """A ``simulate-judge`` process on a free loopback port, and its base URL once it answers."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "open_rag_eval", "-q", "simulate-judge", "--port", str(port),
                               "--latency-ms", str(latency_ms), "--jitter-ms", str(jitter_ms)])
    base_url = f"http://127.0.0.1:{port}/v1"
    for _ in range(200):
        try:
            with urllib.request.urlopen(base_url + "/models", timeout=1):
                return server, base_url
        except OSError:
            time.sleep(0.05)
    server.kill()
    sys.exit("the simulated judge did not start")


def write_config(path: Path, data: Path, cache: Path, args: argparse.Namespace) -> None:
    config: dict[str, Any] = {"input": str(data), "output_dir": str(path.parent / (path.stem + "-out"))}
    if args.judge_free:
        config["evaluators"] = [{"type": "golden", "k_values": [1, 3]}]
    else:
        config["judge"] = {"model": "simulated-judge", "base_url": args.base_url, "max_concurrency": args.concurrency,
                           "cache": str(cache), "api_key_env": "OPEN_RAG_EVAL_SCALE_BENCH_NO_KEY"}
        config["evaluators"] = [{"type": "trec", "k_values": [1, 3], "metrics": args.metrics.split(",")}]
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML


def run_child(argv: list[str], log: Path, traced: Path | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of one ``open-rag-eval`` child (its user+sys CPU printed); exits with its
    log when it fails. ``traced``: the child runs under tracemalloc and writes its top 10 there."""
    started = time.monotonic()
    command = ([sys.executable, str(Path(__file__).with_name("traced_eval.py")), str(traced)] if traced
               else [sys.executable, "-m", "open_rag_eval"])
    with log.open("wb") as stderr:
        child = subprocess.Popen([*command, "-q", *argv], stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"run failed: {log.read_text(encoding='utf-8', errors='replace')[-2000:]}")
    print(f"  ({argv[0]}: user+sys CPU {usage.ru_utime + usage.ru_stime:.1f} s; "
          f"machine load {os.getloadavg()[0]:.1f})", flush=True)
    return wall, usage.ru_maxrss / 1024


def run_cli(config: Path, traced: Path | None = None) -> tuple[float, float, dict[str, Any], Path]:
    """(wall seconds, peak RSS in MB of this child, manifest, output folder)."""
    wall, peak_mb = run_child(["eval", "--config", str(config)], config.parent / (config.stem + ".log"), traced)
    out = config.parent / (config.stem + "-out")
    return wall, peak_mb, json.loads((out / "manifest.json").read_text(encoding="utf-8")), out


def report_figures(out: Path) -> None:
    """The report's size on disk, then a re-render by ``open-rag-eval report`` alone: its wall time and peak RSS."""
    page = (out / "report.html").stat().st_size
    extra = sorted(p for p in (out / "report-queries").glob("*") if p.is_file())
    extra_mb = sum(p.stat().st_size for p in extra) / 1e6
    print(f"report.html {page / 1e6:.1f} MB (target <= 15 MB); beside it report-queries/ with {len(extra)} pages, "
          f"{extra_mb:.1f} MB", flush=True)
    wall, peak_mb = run_child(["report", str(out)], out.parent / "report.log")
    print(f"open-rag-eval report: wall {wall:.1f} s, peak RSS {peak_mb:.0f} MB", flush=True)


def rows(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    with (out / "results.csv").open(encoding="utf-8") as handle:
        return {(r["query_id"], r["run"]): r for r in csv.DictReader(handle)}


def by_query(outputs: list[dict[str, Any]], batches: int) -> list[list[dict[str, Any]]]:
    """Split into batches at query boundaries (a query's runs share its nugget list, so they stay together)."""
    queries = list(dict.fromkeys(o["query_id"] for o in outputs))
    size = -(-len(queries) // batches)
    groups = [set(queries[i:i + size]) for i in range(0, len(queries), size)]
    return [[o for o in outputs if o["query_id"] in group] for group in groups]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=int, default=10_000)
    parser.add_argument("--passages", type=int, default=3)
    parser.add_argument("--runs", type=int, default=2, help="runs per query")
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--latency-ms", type=float, default=2.0)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--metrics", default="umbrela,nuggets,citation,no_answer")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judge-free", action="store_true", help="golden and lexical metrics only: no judge")
    parser.add_argument("--csv", action="store_true",
                        help="write the input as a CSV (one row per passage) instead of JSONL")
    parser.add_argument("--tracemalloc", type=Path, default=None, metavar="FILE",
                        help="run the eval child under tracemalloc; its top 10 at the traced peak go to FILE")
    parser.add_argument("--work", type=Path, default=None, metavar="DIR",
                        help="work in DIR (created; kept) instead of a temporary folder: results name their input "
                             "file, so two trees' results compare byte for byte only from the same folder")
    parser.add_argument("--no-report-render", action="store_true",
                        help="skip the second rendering of the report by 'open-rag-eval report'")
    parser.add_argument("--keep", type=Path, default=None,
                        help="copy the single run's results.csv, results.json and summary.csv into this folder")
    parser.add_argument("--issue20", action="store_true",
                        help="10,000 x 1 run then 2,000 x 5 runs (5 passages, 5 ms, no batches): wall and peak RSS of both")
    args = parser.parse_args()
    shapes = [(10_000, 1), (10_000, 5)] if args.issue20 else [(args.outputs, args.runs)]
    if args.issue20:
        args.passages, args.latency_ms, args.batches = 5, 5.0, 0
    figures = []
    for args.outputs, args.runs in shapes:
        if args.judge_free:
            args.base_url = None
            figures.append((args.outputs // args.runs, args.runs, *measure(args)))
            continue
        server, args.base_url = start_judge(args.latency_ms, args.latency_ms / 2)
        try:
            figures.append((args.outputs // args.runs, args.runs, *measure(args)))
        finally:
            server.terminate()
            server.wait(timeout=30)
    if len(figures) > 1:
        print("queries x runs | wall s | peak RSS MB | load (1 min) after the run")
        for queries, runs, wall, peak_mb, load in figures:
            print(f"{queries} x {runs} | {wall:.1f} | {peak_mb:.0f} | {load:.1f}")


def measure(args: argparse.Namespace) -> tuple[float, float, float]:
    """Runs the single run (and the batches, if any); returns its wall seconds, peak RSS in MB and the load."""
    with contextlib.ExitStack() as stack:
        if args.work is None:
            work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="scale-bench-")))
        else:
            work = args.work
            shutil.rmtree(work, ignore_errors=True)
            work.mkdir(parents=True)
        suffix = ".csv" if args.csv else ".jsonl"
        write_input(work / f"all{suffix}", iter_synthetic(args.outputs, args.passages, args.runs, args.seed,
                                                          args.judge_free))
        write_config(work / "all.json", work / f"all{suffix}", work / "all-cache.sqlite", args)
        wall, peak_mb, manifest, out = run_cli(work / "all.json", args.tracemalloc)
        load = os.getloadavg()[0]
        calls = manifest["accounting"]["total"]["calls"] if manifest.get("accounting") else 0
        what = "golden (retrieval and lexical), no judge" if args.judge_free else \
            f"metrics {args.metrics}, latency {args.latency_ms:g} ms, concurrency {args.concurrency}"
        print(f"outputs {manifest['n_outputs']} ({manifest['n_queries']} queries x {args.runs} runs, "
              f"{args.passages} passages), {what}")
        print(f"single run: wall {wall:.1f} s, judge calls {calls}, {calls / wall:.0f} calls/s, "
              f"{manifest['n_outputs'] / wall:.1f} outputs/s, peak RSS {peak_mb:.0f} MB (target <= 400 MB), "
              f"load {load:.1f}", flush=True)
        sizes = ", ".join(f"{n} {(out / n).stat().st_size:,} B" for n in ("results.csv", "results.json", "summary.csv"))
        print(f"results: {sizes}", flush=True)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for name in ("results.csv", "results.json", "summary.csv"):
                shutil.copyfile(out / name, args.keep / name)
            print(f"kept in {args.keep}", flush=True)
        if args.tracemalloc is not None:
            print(args.tracemalloc.read_text(encoding="utf-8"), flush=True)
        if not args.no_report_render:
            report_figures(out)
        if args.batches == 0:
            return wall, peak_mb, load
        whole = rows(out)
        outputs = synthetic(args.outputs, args.passages, args.runs, args.seed, args.judge_free)

        batch_rows: dict[tuple[str, str], dict[str, str]] = {}
        batch_wall = 0.0
        for i, batch in enumerate(by_query(outputs, args.batches)):
            write_input(work / f"b{i}{suffix}", batch)
            write_config(work / f"b{i}.json", work / f"b{i}{suffix}", work / "batch-cache.sqlite", args)
            seconds, _, _, batch_out = run_cli(work / f"b{i}.json")
            batch_wall += seconds
            batch_rows.update(rows(batch_out))
        same = batch_rows == whole
        print(f"{args.batches} batches: wall {batch_wall:.1f} s in all; per-output results equal to the single "
              f"run: {same} ({len(batch_rows)} rows vs {len(whole)})")
        if not same:
            differing = [key for key in whole if batch_rows.get(key) != whole[key]]
            sys.exit(f"results differ for {len(differing)} outputs, e.g. {differing[:3]}")
    return wall, peak_mb, load


if __name__ == "__main__":
    main()
