"""Memory of a connector run: N queries x R runs fetched from a synthetic connector, evaluated judge-free.

The connector (``fetch_mem_bench:SyntheticConnector``, this file on the child's ``PYTHONPATH``) answers each query
at once with seeded outputs shaped as ``scale_bench``'s (3 passages of ~60 words, 3 cited sentences); the golden
evaluator scores them against the queries file's labels. Runs ``open-rag-eval eval`` as a child process and prints
its wall time, user+sys CPU and peak RSS (``os.wait4``).

    cd /tmp && PYTHONPATH=TREE python TREE/bench/fetch_mem_bench.py --queries 50000 --work DIR
    cmp DIR/out/results.csv OTHER/out/results.csv     # two trees' results, from the same DIR path
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

WORDS = ("solar wind turbine energy grid battery storage carbon emission policy price market coal nuclear hydro "
         "power plant efficiency demand supply climate heat pump electric vehicle charging station network load "
         "forecast tariff subsidy transmission outage capacity reserve frequency voltage").split()


class SyntheticOptions(BaseModel):
    concurrency: int = 500  # queries a batch
    passages: int = 3


class SyntheticConnector:
    """Seeded outputs for any query (its number seeds them), returned at once."""

    Options = SyntheticOptions

    def __init__(self, options: SyntheticOptions) -> None:
        self.options = options

    async def fetch(self, queries: list[tuple[str, str]], repeats: int) -> list[Any]:
        from open_rag_eval import Passage, RAGOutput, segment_answer  # the public API, as a connector uses it

        outputs = []
        for query_id, query in queries:
            rng = random.Random(query_id)
            topic = query.split()[2:5]
            for run in range(1, repeats + 1):
                texts = [" ".join(rng.choices(WORDS + topic * 4, k=60)) + "." for _ in range(self.options.passages)]
                answer = " ".join(" ".join(rng.choices(WORDS + topic, k=12)).capitalize()
                                  + f" [{rng.randint(1, self.options.passages)}]." for _ in range(3))
                passages = tuple(Passage(id=str(i + 1), text=text) for i, text in enumerate(texts))
                outputs.append(RAGOutput(query_id=query_id, query=query, run=run, passages=passages,
                                         answer=segment_answer(answer, [p.id for p in passages]),
                                         answer_text=answer))
        return outputs


def write_inputs(work: Path, queries: int, seed: int) -> Path:
    rng = random.Random(seed)
    lines = ["query_id,query,relevant_ids,expected_keywords"]
    for index in range(queries):
        topic = rng.sample(WORDS, 3)
        lines.append(f"q{index},How does {topic[0]} affect {topic[1]} and {topic[2]}?,{rng.randint(1, 3)},"
                     f"{topic[0]};{topic[1]}")
    (work / "queries.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = {"connector": {"type": "fetch_mem_bench:SyntheticConnector", "queries": "queries.csv", "repeats": 2},
              "output_dir": "out", "evaluators": [{"type": "golden", "k_values": [1, 3]}]}
    path = work / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")  # JSON is YAML
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=5_000, help="queries (2 runs each)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, required=True, help="a folder (emptied) for the inputs and results")
    args = parser.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    config = write_inputs(args.work, args.queries, args.seed)
    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), here) if p),
               HF_HUB_OFFLINE="1")
    started = time.monotonic()
    with (args.work / "eval.log").open("wb") as log:
        child = subprocess.Popen([sys.executable, "-m", "open_rag_eval", "-q", "eval", "--config", str(config)],
                                 stdout=subprocess.DEVNULL, stderr=log, env=env)
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit((args.work / "eval.log").read_text(encoding="utf-8", errors="replace")[-2000:])
    manifest = json.loads((args.work / "out" / "manifest.json").read_text(encoding="utf-8"))
    print(f"connector run: {manifest['n_outputs']} outputs ({manifest['n_queries']} queries x 2 runs), golden; "
          f"wall {wall:.1f} s, user+sys CPU {usage.ru_utime + usage.ru_stime:.1f} s, "
          f"peak RSS {usage.ru_maxrss / 1024:.0f} MB; machine load {os.getloadavg()[0]:.1f}", flush=True)


if __name__ == "__main__":
    main()
