"""Judge-bound benchmark: `open-rag-eval eval` against the simulated judge at a realistic latency.

Synthetic, seeded data (N queries x P passages of ~100 words; answers of ~130 words in ~7 cited sentences) is
written as a CSV in open-rag-eval's layout. The simulated judge is started in this process (300 +- 50 ms per
call by default); for each --concurrency the command runs once with an empty cache and once more with the warm
cache, as a subprocess. From the server's request log it prints, per judge task, calls and tokens per query,
then wall time, queries/s, the floor and the judge's request span / floor:

    floor = max(longest chain of dependent calls of one query, total calls x mean latency / max_concurrency)

where a query's chain is max(umbrela) + sum(nugget_create) + max(nugget_importance) + max(nugget_assign) of
the observed call durations (creation windows run one after another; every other call can run at once).

    python bench/judge_bench.py --queries 20 --passages 5 --concurrency 32 --concurrency 64
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.judge.simulated import (
    RequestRecord,
    SimulatedJudgeServer,
    SimulatedServerConfig,
)

KEY_ENV = "OPEN_RAG_EVAL_BENCH_KEY"
TASKS = (Tasks.UMBRELA, Tasks.NUGGET_CREATE, Tasks.NUGGET_IMPORTANCE, Tasks.NUGGET_ASSIGN, Tasks.SUPPORT,
         Tasks.NO_ANSWER, "unknown")
_SYLLABLES = ["ka", "lo", "mi", "re", "su", "ta", "ne", "vo", "pi", "da", "ro", "fe", "li", "mu", "sa", "te", "ga",
              "no", "be", "zu"]


# --- synthetic data -------------------------------------------------------------------------------------

def _vocabulary(rng: random.Random, size: int) -> list[str]:
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def _sentence(rng: random.Random, filler: list[str], topic_words: list[str], length: int) -> str:
    words = rng.sample(filler, length - len(topic_words)) + topic_words
    rng.shuffle(words)
    return " ".join(words).capitalize() + "."


def _passage(rng: random.Random, filler: list[str], topic: list[str], relevance: int) -> list[str]:
    """Seven 14-word sentences; relevance 0..3 = none, one, two or all four of the query's topic words."""
    present = rng.sample(topic, (0, 1, 2, 4)[relevance])
    return [_sentence(rng, filler, [w for w in present if rng.random() < 0.6], 14) for _ in range(7)]


def _answer(rng: random.Random, passages: list[list[str]], relevances: list[int]) -> str:
    parts = []
    for _ in range(7):
        cited = rng.choices(range(len(passages)), weights=[r + 0.5 for r in relevances])[0]
        source = rng.choice(passages[cited]).rstrip(".").split()
        kept = [w for w in source if rng.random() < 0.75]  # paraphrase: some words dropped, a few added
        marker = cited + 1 if rng.random() < 0.85 else rng.randrange(len(passages)) + 1
        parts.append(" ".join(kept + source[:4]).capitalize() + f" [{marker}].")
    return " ".join(parts)


def make_rows(n_queries: int, n_passages: int, seed: int) -> list[dict[str, str]]:
    rng = random.Random(seed)
    filler = _vocabulary(rng, 600)
    rows = []
    for q in range(1, n_queries + 1):
        topic = rng.sample(filler, 4)
        query = f"what is {topic[0]} {topic[1]} {topic[2]} {topic[3]}"
        relevances = [rng.choice((0, 1, 2, 2, 3)) for _ in range(n_passages)]
        passages = [_passage(rng, filler, topic, r) for r in relevances]
        answer = _answer(rng, passages, relevances)
        for p, sentences in enumerate(passages, start=1):
            rows.append({"query_id": f"q{q}", "query": query, "query_run": "1", "passage_id": f"[{p}]",
                         "passage": " ".join(sentences), "generated_answer": answer if p == 1 else ""})
    return rows


def write_csv(path: Path, rows: Sequence[dict[str, str]]) -> None:
    import csv

    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def write_config(path: Path, base_url: str, concurrency: int, output_dir: str, cache: str) -> None:
    path.write_text(
        f"input: data.csv\noutput_dir: {output_dir}\n"
        f"judge:\n  model: simulated-judge\n  base_url: {base_url}\n  api_key_env: {KEY_ENV}\n"
        f"  max_concurrency: {concurrency}\n  cache: {cache}\n"
        "evaluators:\n  - type: trec\n    k_values: [1, 3, 5]\n",
        encoding="utf-8",
    )


# --- measuring ------------------------------------------------------------------------------------------

def run_eval(config: Path) -> tuple[float, int]:
    env = dict(os.environ, **{KEY_ENV: "simulated"})
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "-q", "eval", "--config", str(config)],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        print(f"  eval exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return wall, done.returncode


def chain_seconds(records: Sequence[RequestRecord]) -> float:
    """The longest per-query chain of dependent calls, in observed seconds."""
    by_query: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for record in records:
        by_query[record.query][record.kind].append(record.end - record.start)
    longest = 0.0
    for kinds in by_query.values():
        chain = sum(kinds.get(Tasks.NUGGET_CREATE, []))
        chain += sum(max(kinds.get(kind, [0.0])) for kind in (Tasks.UMBRELA, Tasks.NUGGET_IMPORTANCE,
                                                               Tasks.NUGGET_ASSIGN))
        longest = max(longest, chain, *(max(durations) for durations in kinds.values()))
    return longest


def report(records: Sequence[RequestRecord], n_queries: int, concurrency: int, wall: float) -> None:
    print(f"  {'task':<18}{'calls/q':>9}{'prompt tok/q':>14}{'compl tok/q':>13}")
    for task in TASKS:
        mine = [r for r in records if r.kind == task]
        if mine:
            print(f"  {task:<18}{len(mine) / n_queries:>9.2f}{sum(r.prompt_tokens for r in mine) / n_queries:>14.0f}"
                  f"{sum(r.completion_tokens for r in mine) / n_queries:>13.0f}")
    print(f"  {'total':<18}{len(records) / n_queries:>9.2f}{sum(r.prompt_tokens for r in records) / n_queries:>14.0f}"
          f"{sum(r.completion_tokens for r in records) / n_queries:>13.0f}")
    if not records:
        return
    mean_latency = statistics.fmean(r.end - r.start for r in records)
    floor = max(chain_seconds(records), len(records) * mean_latency / concurrency)
    span = max(r.end for r in records) - min(r.start for r in records)
    failed = sum(1 for r in records if r.status != 200)
    print(f"  wall {wall:.2f} s  queries/s {n_queries / wall:.1f}  mean latency {mean_latency * 1000:.0f} ms  "
          f"floor {floor:.2f} s  judge span {span:.2f} s  span/floor {span / floor:.2f}  "
          f"max in flight {max_in_flight(records)}  non-200 {failed}")


def max_in_flight(records: Sequence[RequestRecord]) -> int:
    events = sorted([(r.start, 1) for r in records] + [(r.end, -1) for r in records])
    level = peak = 0
    for _, step in events:
        level += step
        peak = max(peak, level)
    return peak


def bench(args: argparse.Namespace, work: Path) -> None:
    write_csv(work / "data.csv", make_rows(args.queries, args.passages, args.seed))
    config = SimulatedServerConfig(latency_ms=args.latency_ms, jitter_ms=args.jitter_ms, seed=args.seed)
    with SimulatedJudgeServer(config) as server:
        for concurrency in args.concurrency or [32, 64]:
            for phase in ("cold", "warm"):
                cfg = work / f"c{concurrency}-{phase}.yaml"
                write_config(cfg, server.base_url, concurrency, f"out-c{concurrency}-{phase}",
                             f"cache-c{concurrency}.sqlite")
                mark = len(server.stats.log)
                wall, _ = run_eval(cfg)
                records = server.stats.log[mark:]
                print(f"\n== max_concurrency {concurrency}, {phase} cache: {len(records)} judge calls, "
                      f"wall {wall:.2f} s")
                if phase == "cold":
                    report(records, args.queries, concurrency, wall)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--passages", type=int, default=5)
    parser.add_argument("--latency-ms", type=float, default=300.0)
    parser.add_argument("--jitter-ms", type=float, default=50.0)
    parser.add_argument("--concurrency", type=int, action="append", help="max_concurrency (repeatable; default 32 64)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", action="store_true", help="keep the work directory (data, configs, results)")
    args = parser.parse_args(argv)
    print(f"judge bench: {args.queries} queries x {args.passages} passages, simulated latency "
          f"{args.latency_ms:g} +- {args.jitter_ms:g} ms")
    if args.keep:
        work = Path(tempfile.mkdtemp(prefix="judge-bench-"))
        print(f"work directory: {work}")
        bench(args, work)
    else:
        with tempfile.TemporaryDirectory(prefix="judge-bench-") as tmp:
            bench(args, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
