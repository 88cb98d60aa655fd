"""How often the judge-health controls call a good judge unhealthy: the demo's trec evaluation against the simulated
judge with noise (a share of verdicts moved to a neighbour), once per seed; prints the share of runs whose controls
failed for some task (the false-alarm rate) with its Wilson 95% interval, and the share of runs called unhealthy.

    python bench/controls_false_alarm.py --runs 20 --noise 0.1
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from collections import Counter
from pathlib import Path

from open_rag_eval.config import load_config
from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
from open_rag_eval.run.pipeline import run
from open_rag_eval.scoring.stats import wilson

DEMO = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"


def one_run(folder: Path, seed: int, noise: float) -> tuple[dict[str, tuple[str, int]], bool, list[str]]:
    """The controls' verdict and pairs told apart per task, whether the run was healthy, and its problems."""
    with SimulatedJudgeServer(SimulatedServerConfig(noise_rate=noise, seed=seed)) as server:
        config = folder / f"run{seed}.yaml"
        config.write_text(f"input: {DEMO}\noutput_dir: out{seed}\njudge:\n  model: simulated-judge\n"
                          f"  base_url: {server.base_url}\n  cache: false\nevaluators:\n  - type: trec\n"
                          "    metrics: [umbrela, nuggets, citation, no_answer]\n", encoding="utf-8")
        report = run(load_config(config))
    health = report.health
    assert health is not None
    return ({task: (row["verdict"], row["told_apart"]) for task, row in health.controls.items()}, health.healthy,
            health.problems)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--noise", type=float, default=0.1, help="the simulated judge's noise_rate (demo: 0.1)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    verdicts: Counter[tuple[str, str]] = Counter()
    fewest: dict[str, int] = {}
    alarms = unhealthy = 0
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.runs):
            found, healthy, problems = one_run(Path(tmp), seed, args.noise)
            verdicts.update((task, verdict) for task, (verdict, _) in found.items())
            for task, (_, apart) in found.items():
                fewest[task] = min(apart, fewest.get(task, apart))
            alarms += any(verdict == "fail" for verdict, _ in found.values())
            unhealthy += not healthy
            if problems:
                print(f"seed {seed}: " + " | ".join(problems))
    rate, low, high = wilson(alarms, args.runs)
    print(f"noise_rate {args.noise}, {args.runs} seeded runs of the demo (trec: umbrela, nuggets, citation, no_answer)")
    print(f"control verdicts (task, verdict: runs): {dict(sorted(verdicts.items()))}")
    print(f"fewest pairs told apart in one run, per task (of 5; a task fails at 0): {fewest}")
    print(f"false alarms (some task's controls failed): {alarms} of {args.runs} = {rate:.1%} "
          f"(Wilson 95% CI {low:.1%}-{high:.1%})")
    print(f"runs called unhealthy for any reason: {unhealthy} of {args.runs}")


if __name__ == "__main__":
    main()
