"""The paired test (``compare``, ``report A B``, sweeps, ablation gates) at many queries: CPU seconds and peak memory.

    python bench/paired_bench.py                      # 50,000 queries, 10,000 resamples
    python bench/paired_bench.py --queries 2000 --loop     # also the plain one-draw-at-a-time loop, and whether equal

``--loop`` also runs the definition the numpy draws follow (``random.Random(seed)`` a draw at a time, a running
sum per resample) and prints whether the two results are equal to the last bit.
"""

from __future__ import annotations

import argparse
import random
import resource
import time

from open_rag_eval.scoring.paired import paired_test


def loop(a: list[float], b: list[float], seed: int, resamples: int) -> tuple[float, float, float]:
    def mean(values: list[float]) -> float:
        total = 0.0
        for value in values:
            total += value
        return total / len(values)

    diffs = [y - x for x, y in zip(a, b)]
    n, observed = len(diffs), mean(diffs)
    rng = random.Random(seed)
    boots = sorted(mean([diffs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    extreme = sum(abs(mean([d if rng.random() < 0.5 else -d for d in diffs])) >= abs(observed) - 1e-12
                  for _ in range(resamples))
    return boots[int(0.025 * resamples)], boots[min(resamples - 1, int(0.975 * resamples))], \
        (extreme + 1) / (resamples + 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=50_000)
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--loop", action="store_true", help="also time the one-draw-at-a-time loop")
    args = parser.parse_args()
    rng = random.Random(1)
    a = [rng.random() for _ in range(args.queries)]
    b = [x + rng.gauss(0.001, 0.1) for x in a]
    started = time.process_time()
    result = paired_test(a, b, resamples=args.resamples)
    print(f"numpy draws: {time.process_time() - started:.1f} s CPU for {args.queries:,} queries x "
          f"{args.resamples:,} resamples; CI [{result.ci95_low:.6g}, {result.ci95_high:.6g}], p {result.p_value:.6g}; "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    if args.loop:
        started = time.process_time()
        found = loop(a, b, 0, args.resamples)
        same = found == (result.ci95_low, result.ci95_high, result.p_value)
        print(f"loop:        {time.process_time() - started:.1f} s CPU; equal to the last bit: {same}")


if __name__ == "__main__":
    main()
