"""Peak RSS of the tools that read a finished run: ``merge``, ``report``, ``compare``, ``plot`` and the Python API's
``load_results``, at N outputs.

Writes N seeded outputs with golden labels (``scale_bench.iter_synthetic``: 2 runs per query, 3 passages), evaluates
them judge-free (the golden evaluator: retrieval and lexical metrics) as S engine-free shards (``eval --shard i/S``),
then runs, each as a child process of its own, and prints its wall time and peak RSS (``os.wait4``'s rusage):

- ``merge`` of the S shard folders into run A;
- ``report A`` (report.html, and its pages beside it);
- ``compare A B`` (its default metrics: the headline ones, here golden nDCG and recall; ``--resamples`` 200), B
  being A's results with every score scaled by 0.97 (a candidate that differs everywhere, without a second
  evaluation; compare reads results.csv and the manifest);
- ``plot A -e trec`` of four metrics (golden nDCG@3 and recall@1, lexical keyword coverage and groundedness);
- ``load_results A`` (``report.loader``) in a child Python, then every metric's values, per-query means and
  metric names asked of it, as a notebook would (``rows`` is not asked: it holds every row, see docs/scaling.md);
- ``results_dir``: ``consistency``'s reader of an earlier run (``load_results_dir A``) in a child Python: every
  output and score of the run, held (a one-window case);
- ``Results``: the Python API's ``Results.from_folder A`` in a child Python, asked its summary (a DataFrame),
  ``simulated``, ``complete``, its repr and each row one at a time (``iter_rows``; ``rows()`` on a tree without it).

    python bench/tools_mem_bench.py --outputs 10000
    python bench/tools_mem_bench.py --outputs 100000 --work /tmp/tools-100k      # keeps the folders
    python bench/tools_mem_bench.py --outputs 100000 --work /tmp/tools-100k --reuse   # tools again, same shards
    python bench/tools_mem_bench.py --results RUN --work DIR --only plot load_results   # a run already written

The tools run as ``python -m open_rag_eval`` in the work folder: set ``PYTHONPATH`` to the source tree to measure.
``--reuse`` skips writing the input and the shards when ``--work`` already holds them (to measure a change to the
tools alone). ``--results RUN`` measures the tools after merge on a results folder already written (say one
``scale_bench.py --judge-free --keep`` kept: the same evaluator and shape), without writing shards.
Target (issue 30): peak RSS <= 400 MB at 100,000 outputs and RSS(100k) <= 1.2 x RSS(10k).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scale_bench import iter_synthetic, run_child, write_jsonl

SCALE = 0.97
TOOLS = ("merge", "report", "compare", "plot", "load_results", "results_dir", "Results")
PLOTTED = ("golden.ndcg@3", "golden.recall@1", "lexical.keyword_coverage", "lexical.groundedness")


def candidate(a: Path, b: Path) -> None:
    """B: A's results.csv with every score times ``SCALE`` (keys, reasons and the simulated flag as they are)."""
    b.mkdir(parents=True, exist_ok=True)
    for name in ("manifest.json", "summary.csv"):
        shutil.copyfile(a / name, b / name)
    csv.field_size_limit(2**31 - 1)
    with (a / "results.csv").open(newline="", encoding="utf-8") as src, \
            (b / "results.csv").open("w", newline="", encoding="utf-8") as dst:
        reader = csv.reader(src)
        writer = csv.writer(dst)
        header = next(reader)
        writer.writerow(header)
        scored = [i for i, name in enumerate(header)
                  if name not in ("query_id", "query", "run", "simulated_judge") and not name.endswith(".error")]
        for row in reader:
            for i in scored:
                if row[i]:
                    row[i] = repr(float(row[i]) * SCALE)
            writer.writerow(row)


def shards(work: Path, outputs: int, count: int) -> list[Path]:
    data, config = work / "input.jsonl", work / "config.json"
    write_jsonl(data, iter_synthetic(outputs, 3, 2, 0, labels=True))
    config.write_text(json.dumps({"input": str(data), "output_dir": str(work / "out"),
                                  "evaluators": [{"type": "golden", "k_values": [1, 3]}]}), encoding="utf-8")
    folders = []
    for index in range(count):
        folder = work / f"shard-{index}"
        wall, peak = run_child(["eval", "--config", str(config), "--shard", f"{index}/{count}", "-o", str(folder)],
                               work / f"shard-{index}.log")
        print(f"eval --shard {index}/{count}: wall {wall:.1f} s, peak RSS {peak:.0f} MB", flush=True)
        folders.append(folder)
    return folders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outputs", type=int, default=10_000)
    parser.add_argument("--shards", type=int, default=2)
    parser.add_argument("--work", type=Path, default=None, metavar="DIR", help="work in DIR (kept)")
    parser.add_argument("--reuse", action="store_true", help="keep the input and shards already in --work")
    parser.add_argument("--resamples", type=int, default=200,
                        help="compare's bootstrap / permutation resamples (its memory does not depend on them; its "
                        "time does: pure Python, 2 x resamples x queries per metric)")
    parser.add_argument("--only", nargs="+", choices=TOOLS, default=None,
                        help="run only these tools (merge's folder must exist for the others)")
    parser.add_argument("--results", type=Path, default=None, metavar="RUN",
                        help="measure the tools on this results folder (no shards, no merge)")
    parser.add_argument("--api-child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--results-dir-child", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--results-child", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.results_child:
        return results_child(args.results_child)
    if args.api_child:
        return api_child(args.api_child)
    if args.results_dir_child:
        return results_dir_child(args.results_dir_child)
    with contextlib.ExitStack() as stack:
        work = (args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tools-mem-")))).resolve()
        work.mkdir(parents=True, exist_ok=True)
        os.chdir(work)  # the children import open_rag_eval from PYTHONPATH (or the installed one), never from here
        tools = args.only or [t for t in TOOLS if not (args.results and t == "merge")]
        folders = [work / f"shard-{i}" for i in range(args.shards)]
        if args.results:
            if "merge" in tools:
                parser.error("--results: the run is already merged (leave merge out of --only)")
            print(f"results folder {args.results}", flush=True)
        elif not (args.reuse and all((f / "shard.json").is_file() for f in folders)):
            folders = shards(work, args.outputs, args.shards)
        a, b = (args.results.resolve() if args.results else work / "A"), work / "B"
        if not args.results:
            print(f"{args.outputs} outputs (2 runs per query, 3 passages), golden evaluator, {args.shards} shards",
                  flush=True)
        figures = []
        if "merge" in tools:
            shutil.rmtree(a, ignore_errors=True)
            figures.append(("merge", *run_child(["merge", *map(str, folders), "-o", str(a)], work / "merge.log")))
            say(figures[-1])
        if "report" in tools:
            figures.append(("report", *run_child(["report", str(a)], work / "report.log")))
            say(figures[-1])
        if "compare" in tools:
            shutil.rmtree(b, ignore_errors=True)
            candidate(a, b)
            (work / "compare").mkdir(exist_ok=True)
            figures.append(("compare", *run_child(["compare", str(a), str(b), "--resamples", str(args.resamples),
                                                   "-o", str(work / "compare")], work / "compare.log")))
            say(figures[-1])
        if "plot" in tools:
            figures.append(("plot", *run_child(["plot", str(a), "-e", "trec", "--metrics-to-plot", *PLOTTED,
                                                "-o", str(work / "plot.png")], work / "plot.log")))
            say(figures[-1])
        if "load_results" in tools:
            figures.append(("load_results", *run_python([__file__, "--api-child", str(a)], work / "api.log")))
            say(figures[-1])
        if "results_dir" in tools:
            figures.append(("results_dir", *run_python([__file__, "--results-dir-child", str(a)],
                                                       work / "results_dir.log")))
            say(figures[-1])
        if "Results" in tools:
            figures.append(("Results", *run_python([__file__, "--results-child", str(a)], work / "results.log")))
            say(figures[-1])
        print("tool | wall s | peak RSS MB")
        for tool, wall, peak in figures:
            print(f"{tool} | {wall:.1f} | {peak:.0f}")


def api_child(folder: Path) -> None:
    """In the child: what a notebook asks of a large run through ``load_results``, its figures on stdout."""
    from open_rag_eval.report.loader import load_results

    result = load_results(folder)
    metrics = result.metrics
    total = 0.0
    for metric in metrics:
        total += sum(result.values(metric)) + sum(result.query_means(metric).values())
    print(f"{len(metrics)} metrics, {len(result.queries())} queries, sum {total:.6f}")


def results_dir_child(folder: Path) -> None:
    """In the child: ``consistency``'s read of an earlier run's results.json, its figures on stdout."""
    from open_rag_eval.evaluators.consistency import load_results_dir

    outputs, scores = load_results_dir(folder)
    print(f"{len(outputs)} outputs, {len(scores)} scores")


def results_child(folder: Path) -> None:
    """In the child: what a notebook asks of a large run's ``Results.from_folder``, its figures on stdout."""
    from open_rag_eval.api.results import Results

    results = Results.from_folder(folder)
    summary = results.summary()
    rows = results.iter_rows() if hasattr(results, "iter_rows") else results.rows()
    count = sum(1 for _ in rows)
    print(f"{len(summary)} metrics, {count} rows, simulated {results.simulated}, complete {results.complete}, "
          f"{repr(results)[:40]}")


def run_python(argv: list[str], log: Path) -> tuple[float, float]:
    """(wall seconds, peak RSS in MB) of a child Python running ``argv``; exits with its log when it fails."""
    started = time.monotonic()
    with log.open("wb") as stderr:
        child = subprocess.Popen([sys.executable, *argv], stdout=stderr, stderr=stderr)
        _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {log.read_text(encoding='utf-8', errors='replace')[-2000:]}")
    print(f"  (user+sys CPU {usage.ru_utime + usage.ru_stime:.1f} s; machine load {os.getloadavg()[0]:.1f}; "
          f"{log.read_text(encoding='utf-8').strip().splitlines()[-1]})", flush=True)
    return time.monotonic() - started, usage.ru_maxrss / 1024


def say(figure: tuple[str, float, float]) -> None:
    tool, wall, peak = figure
    print(f"{tool}: wall {wall:.1f} s, peak RSS {peak:.0f} MB (target <= 400 MB)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
