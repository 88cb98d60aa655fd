"""Side by side with vectara's open-rag-eval 0.3.0: alternating pairs of whole commands on the same data and judge.

    python bench/vs_vectara.py                                  # 5 pairs, 20 queries x 5 passages, 300 +- 50 ms
    python bench/vs_vectara.py --pairs 7 --also /path/to/an/older/checkout

1. vectara's 0.3.0 in a virtualenv of its own (``--venv``, made once as bench/vectara_reference.py makes it: the
   wheel from PyPI with what its TREC evaluator imports). Nothing of it is needed by the tests.
2. The benchmark data of bench/judge_bench.py (seeded; one CSV, read by both tools: the same columns).
3. Two simulated judges in this process at the same latency, one for each tool (vectara's asks for a JSON-schema
   reply on every call: its judge, tests/recording_judge.py's, answers with that JSON).
4. Each pair runs ``open-rag-eval eval`` (``--concurrency``, a fresh cache, the trec evaluator with k 1, 3, 5) and
   vectara's TREC evaluator (bench/vectara_eval_driver.py: its ``run_eval`` for a TREC evaluator on a CSV, 5
   worker threads, HHEM stubbed) as child processes, the order alternating from pair to pair; ``--also DIR`` adds
   the same eval run from another checkout (e.g. an older commit's worktree) to every pair.

Per pair it prints the load average (1 min) when the pair started, each command's wall and user+sys CPU
(``os.wait4``), ours: launch to the first judge request (the judge's log, the same clock), calls, the judge's
floor (calls x mean latency / concurrency) and wall / floor; and vectara's wall over ours. Then the medians.
The machine is shared: compare CPU seconds where the load differed, and read wall figures beside their load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ too, when run as written

from judge_bench import KEY_ENV, make_rows, write_config, write_csv
from perf_bench import cli, run_child

from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
from tests.recording_judge import RecordingJudge
from vectara_reference import make_venv

BENCH = Path(__file__).resolve().parent


@dataclass
class Timed:
    wall: float
    cpu: float
    first: float  # launch to the judge's first request (s); nan when none came
    calls: int
    mean_latency: float
    code: int


def timed(argv: list[str], server: SimulatedJudgeServer, env: dict[str, str]) -> Timed:
    """One child process against ``server``: its wall, CPU and, from the server's log, its requests."""
    mark = len(server.stats.log)
    started = time.perf_counter()  # run_child starts its clock a few microseconds later
    wall, cpu, _, code = run_child(argv, env)
    records = server.stats.log[mark:]
    first = min((r.start for r in records), default=float("nan")) - started
    latency = statistics.fmean(r.end - r.start for r in records) if records else 0.0
    return Timed(wall, cpu, first, len(records), latency, code)


def ours(tree: Path | None, work: Path, name: str, server: SimulatedJudgeServer, concurrency: int) -> Timed:
    config = work / f"{name}.yaml"
    write_config(config, server.base_url, concurrency, f"out-{name}", f"cache-{name}.sqlite")
    env = dict(os.environ, **{KEY_ENV: "simulated"})
    argv = [*cli(), "-q", "eval", "--config", str(config)]
    if tree is not None:  # another checkout: its package first on the path
        env["PYTHONPATH"] = str(tree)
        # -P: the other checkout's package, not the one of the current folder ("-m" puts that first on the path)
        argv = [sys.executable, "-P", "-m", "open_rag_eval", "-q", "eval", "--config", str(config)]
    return timed(argv, server, env)


def vectara(python: Path, work: Path, name: str, server: SimulatedJudgeServer) -> Timed:
    # -I: neither PYTHONPATH nor this checkout (our package has its import name) reaches its interpreter
    argv = [str(python), "-I", str(BENCH / "vectara_eval_driver.py"), str(work / "data.csv"), server.base_url,
            str(work / f"{name}.csv")]
    return timed(argv, server, dict(os.environ))


def line(label: str, run: Timed, concurrency: int) -> str:
    floor = run.calls * run.mean_latency / concurrency
    return (f"  {label:<10} wall {run.wall:6.2f} s  CPU {run.cpu:5.2f} s  first request {run.first:5.3f} s  "
            f"calls {run.calls:4d}  floor {floor:4.2f} s  wall/floor {run.wall / floor if floor else 0:5.2f}")


def pairs(args: argparse.Namespace, python: Path, work: Path) -> dict[str, list[Any]]:
    config = SimulatedServerConfig(latency_ms=args.latency_ms, jitter_ms=args.jitter_ms, seed=args.seed)
    found: dict[str, list[Any]] = {"ratio": [], "first": [], "over_floor": [], "cpu": [], "load": []}
    with SimulatedJudgeServer(config) as judge, RecordingJudge(config) as peer:
        for pair in range(args.pairs):
            load = os.getloadavg()[0]
            steps = ["ours", "vectara"] if pair % 2 == 0 else ["vectara", "ours"]
            done: dict[str, Timed] = {}
            for step in steps:
                if step == "ours":
                    done["ours"] = ours(None, work, f"ours{pair}", judge, args.concurrency)
                    for index, tree in enumerate(args.also):
                        done[f"also{index}"] = ours(tree, work, f"also{index}-{pair}", judge, args.concurrency)
                else:
                    done["vectara"] = vectara(python, work, f"vectara{pair}", peer)
            mine = done["ours"]
            floor = mine.calls * mine.mean_latency / args.concurrency
            ratio = done["vectara"].wall / mine.wall
            print(f"pair {pair + 1} (load {load:.2f}, {' then '.join(steps)}): vectara / ours = {ratio:.1f}x")
            for label, run in done.items():
                print(line(label, run, args.concurrency if label != "vectara" else 5))
            found["ratio"].append(ratio)
            found["first"].append(mine.first)
            found["over_floor"].append(mine.wall / floor if floor else float("nan"))
            found["cpu"].append(mine.cpu)
            found["load"].append(load)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--passages", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--jitter-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, default=64, help="ours: judge.max_concurrency")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--venv", type=Path, default=Path(tempfile.gettempdir()) / "vectara-0.3.0-venv")
    parser.add_argument("--also", type=Path, action="append", default=[], help="another checkout's eval too")
    args = parser.parse_args()
    python = make_venv(args.venv)
    print(f"vs vectara 0.3.0: {args.queries} queries x {args.passages} passages, judge {args.latency_ms:g} +- "
          f"{args.jitter_ms:g} ms; ours at concurrency {args.concurrency}, vectara with its 5 worker threads")
    with tempfile.TemporaryDirectory(prefix="vs-vectara-") as tmp:
        work = Path(tmp)
        write_csv(work / "data.csv", make_rows(args.queries, args.passages, args.seed))
        found = pairs(args, python, work)
    med = statistics.median
    print(f"median over {args.pairs} pairs (loads {min(found['load']):.2f}-{max(found['load']):.2f}): "
          f"vectara / ours {med(found['ratio']):.1f}x (range {min(found['ratio']):.1f}-{max(found['ratio']):.1f}; "
          f"target >= 20x); ours: launch to first request {med(found['first']):.3f} s (target <= 0.25 s), "
          f"wall / floor {med(found['over_floor']):.2f} (target <= 1.3), CPU {med(found['cpu']):.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
