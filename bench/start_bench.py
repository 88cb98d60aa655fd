"""Where a run's time goes before its first judge request, step by step, in two trees side by side.

    python bench/start_bench.py                        # main vs this checkout, 3 cold runs of each, alternating
    python bench/start_bench.py --before HEAD~5 --after main --runs 5    # two exports: like with like

Each run is ``open-rag-eval eval`` of the benchmark data (bench/judge_bench.py: 20 queries x 5 passages, the trec
evaluator, concurrency 64, a fresh cache) against one ``simulate-judge`` process (300 +- 50 ms), started as the
program is (``main()``, the console script's path) with marks at each step: the interpreter and ``site``, the CLI
imported, the argument parser, ``run.pipeline`` and the config imported (its sections' schemas), the config loaded,
the first judge request (from the run's pool, or from the head start's thread where the tree has one), the
process's exit (its exit handlers). The run's modules are patched as the run imports them, never imported earlier
than the run would. At each mark: the process's CPU (all its threads) and the wall time since launch. Prints the
median of each tree's runs and the load average of each run: CPU seconds are what to compare on a shared machine;
wall seconds only beside their load. A checkout ran slower than an export of the same commit here (30-90 ms to the
first request), so compare two exports (``--after``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from judge_bench import KEY_ENV, make_rows, write_config, write_csv
from same_results import ROOT, export
from scale_bench import start_judge

MARKED = """
import atexit, os, sys, time
launch, marks = float(os.environ["LAUNCH"]), open(os.environ["MARKS"], "w")

def mark(step):
    marks.write(f"{step}\\t{time.process_time():.4f}\\t{time.time() - launch:.4f}\\n")
    marks.flush()

mark("interpreter and site")
import open_rag_eval.cli as cli
mark("open_rag_eval.cli imported")
import open_rag_eval.cli.commands.eval as command
import importlib.abc, importlib.util
run, sent = command.run, []

def first_sent():
    if not sent:
        sent.append(1)
        mark("first judge request (openai imported: %s)" % ("openai" in sys.modules))

def patch_pool(http11):
    send = http11.Http11Pool.request

    async def first(self, *args, **kwargs):
        first_sent()
        return await send(self, *args, **kwargs)

    http11.Http11Pool.request = first

def patch_config(config):
    load = config.load_config

    def load_config(*a, **k):
        mark("run.pipeline and the config imported")
        loaded = load(*a, **k)
        mark("config loaded")
        return loaded

    config.load_config = load_config

# the judge's pool and the config's loader are patched as the run imports them: importing them here would move
# their import (and the config's schemas) before the run's own steps
PATCHES = {"open_rag_eval.judge.http11": patch_pool, "open_rag_eval.config": patch_config}

class Patcher(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name not in PATCHES or getattr(self, "busy", False):
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        execute, patch = spec.loader.exec_module, PATCHES.pop(name)

        def exec_module(module):
            execute(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, Patcher())
# the head start (judge.head_start, where the tree has it) sends a run's first requests from a thread while the
# program loads; the package is looked for as a file, since importing open_rag_eval.judge costs an older tree more
if os.path.exists(os.path.join(os.path.dirname(cli.__file__), os.pardir, "judge", "head_start.py")):
    import open_rag_eval.judge.head_start as head_start
    write = head_start.HeadStart._send

    def written(self, request):
        first_sent()
        return write(self, request)

    head_start.HeadStart._send = written

def marked(args):
    mark("the argument parser")
    return run(args)

command.run = marked
atexit.register(mark, "exit")
sys.argv = ["open-rag-eval", "-q", "eval", "--config", sys.argv[1]]
cli.main()
"""


def one_run(tree: Path, config: Path, marks: Path) -> list[tuple[str, float, float]]:
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=str(tree), MARKS=str(marks), LAUNCH=repr(time.time()), **{KEY_ENV: "simulated"})
    subprocess.run([sys.executable, "-c", MARKED, str(config)], env=env, cwd=config.parent, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    steps = [line.rstrip("\n").split("\t") for line in marks.read_text(encoding="utf-8").splitlines()]
    return [(step, float(cpu), float(wall)) for step, cpu, wall in steps]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="main", help="a git revision of this repository (default main)")
    parser.add_argument("--after", help="a git revision too, exported as --before is (default: this checkout as it "
                        "is; two exports compare like with like)")
    parser.add_argument("--runs", type=int, default=3, help="cold runs of each tree")
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--jitter-ms", type=float, default=50.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="start-bench-") as tmp:
        work = Path(tmp)
        trees = {"before": export(args.before, work / "before"),
                 "after": ROOT if args.after is None else export(args.after, work / "after")}
        for tree in trees.values():  # compiled once, as an installed package is
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(tree / "open_rag_eval")], check=True,
                           stdout=subprocess.DEVNULL)
        write_csv(work / "data.csv", make_rows(20, 5, 0))
        judge, base_url = start_judge(args.latency_ms, args.jitter_ms)
        found: dict[str, dict[str, list[tuple[float, float]]]] = {name: {} for name in trees}
        loads: dict[str, list[float]] = {name: [] for name in trees}
        try:
            for index in range(args.runs):
                for name in (["before", "after"] if index % 2 == 0 else ["after", "before"]):
                    config = work / f"{name}{index}.yaml"
                    write_config(config, base_url, 64, f"out-{name}{index}", f"cache-{name}{index}.sqlite")
                    loads[name].append(os.getloadavg()[0])
                    for step, cpu, wall in one_run(trees[name], config, work / "marks.txt"):
                        found[name].setdefault(step.split(" (")[0], []).append((cpu, wall))
        finally:
            judge.kill()
    print(f"before: {args.before}, loads {min(loads['before']):.1f}-{max(loads['before']):.1f}; after: "
          f"{args.after or 'this checkout'}, loads {min(loads['after']):.1f}-{max(loads['after']):.1f}; median of {args.runs} cold runs each")
    print(f"{'from launch to':<42}{'CPU before':>11}{'CPU after':>10}{'wall before':>12}{'wall after':>11}")
    for step in found["after"]:
        cpu = [statistics.median(c for c, _ in found[name].get(step, [(float('nan'), 0.0)])) for name in trees]
        wall = [statistics.median(w for _, w in found[name].get(step, [(0.0, float('nan'))])) for name in trees]
        print(f"{step:<42}{cpu[0]:11.3f}{cpu[1]:10.3f}{wall[0]:12.3f}{wall[1]:11.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
