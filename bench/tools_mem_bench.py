"""Peak RSS of the tools that read a finished run: ``merge``, ``report`` and ``compare``, at N outputs.

Writes N seeded outputs with golden labels (``scale_bench.iter_synthetic``: 2 runs per query, 3 passages), evaluates
them judge-free (the golden evaluator: retrieval and lexical metrics) as S engine-free shards (``eval --shard i/S``),
then runs, each as a child process of its own, and prints its wall time and peak RSS (``os.wait4``'s rusage):

- ``merge`` of the S shard folders into run A;
- ``report A`` (report.html, and its pages beside it);
- ``compare A B`` (its default metrics: the headline ones, here golden nDCG and recall; ``--resamples`` 200), B
  being A's results with every score scaled by 0.97 (a candidate that differs everywhere, without a second
  evaluation; compare reads results.csv and the manifest).

    python bench/tools_mem_bench.py --outputs 10000
    python bench/tools_mem_bench.py --outputs 100000 --work /tmp/tools-100k      # keeps the folders
    python bench/tools_mem_bench.py --outputs 100000 --work /tmp/tools-100k --reuse   # tools again, same shards

The tools run as ``python -m open_rag_eval`` in the work folder: set ``PYTHONPATH`` to the source tree to measure.
``--reuse`` skips writing the input and the shards when ``--work`` already holds them (to measure a change to the
tools alone). Target (issue 30): peak RSS <= 400 MB at 100,000 outputs and RSS(100k) <= 1.2 x RSS(10k).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from scale_bench import iter_synthetic, run_child, write_jsonl

SCALE = 0.97


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
    parser.add_argument("--only", nargs="+", choices=["merge", "report", "compare"], default=None,
                        help="run only these tools (merge's folder must exist for the others)")
    args = parser.parse_args()
    with contextlib.ExitStack() as stack:
        work = (args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tools-mem-")))).resolve()
        work.mkdir(parents=True, exist_ok=True)
        os.chdir(work)  # the children import open_rag_eval from PYTHONPATH (or the installed one), never from here
        folders = [work / f"shard-{i}" for i in range(args.shards)]
        if not (args.reuse and all((f / "shard.json").is_file() for f in folders)):
            folders = shards(work, args.outputs, args.shards)
        a, b = work / "A", work / "B"
        print(f"{args.outputs} outputs (2 runs per query, 3 passages), golden evaluator, {args.shards} shards",
              flush=True)
        figures = []
        tools = args.only or ["merge", "report", "compare"]
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
        print("tool | wall s | peak RSS MB")
        for tool, wall, peak in figures:
            print(f"{tool} | {wall:.1f} | {peak:.0f}")


def say(figure: tuple[str, float, float]) -> None:
    tool, wall, peak = figure
    print(f"{tool}: wall {wall:.1f} s, peak RSS {peak:.0f} MB (target <= 400 MB)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
