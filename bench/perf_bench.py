"""Performance benchmark: the client's CPU per judge call, high concurrency, the whole command's time and start-up.

Every figure comes from the real CLI run as a child process against the simulated judge (its own process for the
CPU figures, so the two sides' CPU is measured apart). Parts (each can be run alone with ``--part``):

- ``help``: wall time of ``open-rag-eval --help`` (best of 7).
- ``cpu``: N queries x P passages (default 500 x 5) at 0 ms judge latency, concurrency 64. The eval child's
  user+sys CPU (from ``os.wait4``) divided by its judge calls (from the manifest), the same for a warm (fully
  cached) rerun, and the difference: CPU per call net of start-up and writing. Beside it: calls/s and the simulated
  judge's own CPU per request (from ``/proc/PID/stat``), so it is clear which side is the limit.
- ``client``: the judge client alone, in this process: N distinct requests (``--calls``, default 3,000; after a
  warm-up of 200) at concurrency 64 against the same 0 ms judge process, cache off; this process's user+sys CPU
  (``getrusage``) per call, three rounds. No start-up, input, metrics or writing: the client's own cost per call.
- ``concurrency``: N queries (default 500) at 300 +- 50 ms, concurrency 64 then 256; wall, judge span and
  span / floor (see ``judge_bench.py`` for the floor).
- ``eval``: the whole ``eval`` command on 20 x 5 at 300 +- 50 ms, concurrency 64: cold (empty cache), then warm.

    python bench/perf_bench.py                       # every part
    python bench/perf_bench.py --part cpu --queries 500
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from judge_bench import KEY_ENV, make_rows, report, write_config, write_csv
from scale_bench import start_judge

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

PARTS = ("help", "cpu", "client", "concurrency", "eval")
TICKS = os.sysconf("SC_CLK_TCK")


def cli() -> list[str]:
    """The installed console script when there is one (what users type), else ``python -m open_rag_eval``."""
    script = Path(sys.executable).with_name("open-rag-eval")
    return [str(script)] if script.exists() else [sys.executable, "-m", "open_rag_eval"]


def run_child(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[float, float, float, int]:
    """(wall s, user+sys CPU s, peak RSS MB, exit code) of one child process."""
    started = time.perf_counter()
    child = subprocess.Popen(list(argv), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert child.stderr is not None
    errors = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"  exit {code}: {errors.decode(errors='replace')[-800:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code


def part_help() -> None:
    runs = [run_child([*cli(), "--help"]) for _ in range(7)]
    walls, cpus = sorted(r[0] for r in runs), sorted(r[1] for r in runs)
    print(f"open-rag-eval --help: best {walls[0]:.3f} s, median {walls[3]:.3f} s (target <= 0.15 s); user+sys CPU "
          f"median {cpus[3]:.3f} s; machine load {os.getloadavg()[0]:.1f}")


def _proc_cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _eval(config: Path) -> tuple[float, float, float, int]:
    env = dict(os.environ, **{KEY_ENV: "simulated"})
    return run_child([*cli(), "-q", "eval", "--config", str(config)], env)


def _calls(out: Path) -> int:
    total = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["accounting"]["total"]
    return int(total["calls"]) + int(total["retries"])


def part_cpu(args: argparse.Namespace, work: Path) -> None:
    write_csv(work / "data.csv", make_rows(args.queries, args.passages, args.seed))
    server, base_url = start_judge(0, 0)
    try:
        figures = {}
        for phase in ("cold", "warm"):
            config = work / f"cpu-{phase}.yaml"
            write_config(config, base_url, 64, f"out-cpu-{phase}", "cache-cpu.sqlite")
            judge_before = _proc_cpu(server.pid)
            wall, cpu, rss, _ = _eval(config)
            figures[phase] = (wall, cpu, rss, _calls(work / f"out-cpu-{phase}"), _proc_cpu(server.pid) - judge_before)
    finally:
        server.terminate()
        server.wait(timeout=30)
    (wall, cpu, rss, calls, judge_cpu), (warm_wall, warm_cpu, _, _, _) = figures["cold"], figures["warm"]
    print(f"cpu: {args.queries} x {args.passages} at 0 ms, concurrency 64: {calls} judge calls in {wall:.2f} s "
          f"({calls / wall:.0f} calls/s), eval CPU {cpu:.2f} s, peak RSS {rss:.0f} MB")
    print(f"  eval CPU per call {cpu / calls * 1000:.2f} ms (target <= 1.0 ms); net of the warm rerun's "
          f"{warm_cpu:.2f} s (wall {warm_wall:.2f} s): {(cpu - warm_cpu) / calls * 1000:.2f} ms")
    print(f"  simulated judge CPU per request {judge_cpu / calls * 1000:.2f} ms "
          f"({judge_cpu / wall * 100:.0f}% of a core over the run)")


def part_client(args: argparse.Namespace, work: Path) -> None:
    from open_rag_eval.judge.base import JudgeRequest
    from open_rag_eval.judge.client import open_judge
    from open_rag_eval.judge.config import JudgeConfig

    rows = make_rows(max(1, args.calls // 5), 5, args.seed)
    texts = [f"Query: {row['query']}\nPassage {n}: {row['passage']}" for n, row in enumerate(rows)]
    server, base_url = start_judge(0, 0)
    os.environ[KEY_ENV] = "simulated"
    config = JudgeConfig(model="simulated-judge", base_url=base_url, api_key_env=KEY_ENV, max_concurrency=64,
                         cache=False)

    def ask(n: int) -> JudgeRequest:
        prompt = f"Grade the passage (0-3).\n{texts[n % len(texts)]}\n#{n}"
        return JudgeRequest(Tasks.UMBRELA, (("user", prompt),), {"temperature": 0.0, "max_tokens": 64})

    async def rounds() -> list[float]:
        judge = open_judge(config, base_dir=work)
        try:
            await asyncio.gather(*(judge.complete(ask(-n)) for n in range(1, 201)))  # connections, imports
            figures = []
            for round_ in range(3):
                before = resource.getrusage(resource.RUSAGE_SELF)
                await asyncio.gather(*(judge.complete(ask(round_ * args.calls + n)) for n in range(args.calls)))
                after = resource.getrusage(resource.RUSAGE_SELF)
                cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
                figures.append(cpu / args.calls * 1000)
            return figures
        finally:
            await judge.aclose()

    try:
        figures = asyncio.run(rounds())
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"client: {args.calls} calls at concurrency 64, 0 ms judge, in-process client CPU per call "
          f"{', '.join(f'{f:.3f}' for f in figures)} ms (three rounds); machine load {os.getloadavg()[0]:.1f}")


def _judge_run(args: argparse.Namespace, work: Path, queries: int, concurrencies: Sequence[int],
               warm: bool, tag: str) -> None:
    write_csv(work / f"{tag}.csv", make_rows(queries, args.passages, args.seed))
    shutil.copy(work / f"{tag}.csv", work / "data.csv")
    config = SimulatedServerConfig(latency_ms=300, jitter_ms=50, seed=args.seed)
    with SimulatedJudgeServer(config) as server:
        for concurrency in concurrencies:
            for phase in ("cold", "warm") if warm else ("cold",):
                cfg = work / f"{tag}-c{concurrency}-{phase}.yaml"
                write_config(cfg, server.base_url, concurrency, f"out-{tag}-c{concurrency}-{phase}",
                             f"cache-{tag}-c{concurrency}.sqlite")
                mark = len(server.stats.log)
                wall, cpu, _, _ = _eval(cfg)
                records = server.stats.log[mark:]
                print(f"{tag}: {queries} x {args.passages} at 300 ms, concurrency {concurrency}, {phase}: "
                      f"wall {wall:.2f} s, eval CPU {cpu:.2f} s, {len(records)} judge calls")
                if phase == "cold":
                    report(records, queries, concurrency, wall)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", action="append", choices=PARTS, help="repeatable; default every part")
    parser.add_argument("--queries", type=int, default=500, help="queries of the cpu and concurrency parts")
    parser.add_argument("--passages", type=int, default=5)
    parser.add_argument("--calls", type=int, default=3000, help="judge calls of each round of the client part")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    parts = args.part or list(PARTS)
    with tempfile.TemporaryDirectory(prefix="perf-bench-") as tmp:
        work = Path(tmp)
        os.chdir(work)
        if "help" in parts:
            part_help()
        if "cpu" in parts:
            part_cpu(args, work)
        if "client" in parts:
            part_client(args, work)
        if "concurrency" in parts:
            _judge_run(args, work, args.queries, (64, 256), False, "concurrency")
        if "eval" in parts:
            _judge_run(args, work, 20, (64,), True, "eval")
    return 0


if __name__ == "__main__":
    sys.exit(main())
