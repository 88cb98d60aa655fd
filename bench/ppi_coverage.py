"""Coverage of the corrected (PPI++) 95% interval, against the judge-only and people-only ones, on a simulated
population whose truth is known (docs/calibration.md).

    python bench/ppi_coverage.py                          # 1,000 repetitions at 50, 100, 200 labelled of 1,000
    python bench/ppi_coverage.py --labelled 400 --reps 200

The population: each query has 5 passages; a query's quality q ~ Beta(2, 3) and each passage's human UMBRELA grade
~ Binomial(3, q), so the mean grade over the population is exactly 3 x 2/5 = 1.2. The judge grades a passage
0.4 too high on a third of the passages (drawn at random) and with Gaussian noise (sd 0.6) elsewhere, clipped to
[0, 3]. The metric is the UMBRELA mean per query (the mean grade of its 5 passages). Each repetition draws 1,000
new queries, labels ``n`` of them at random (people's grades), and builds three 95% intervals for the population
mean: the corrected one (PPI++, lam estimated), the judge-only one (normal, every query's judge value) and the
people-only one (normal, the labelled queries). Coverage: the share of repetitions whose interval holds 1.2.
"""

from __future__ import annotations

import argparse

import numpy as np

from open_rag_eval.scoring.ppi import normal_mean, ppi_mean

TRUTH = 3 * 2 / 5  # E[Binomial(3, q)] with q ~ Beta(2, 3)
PASSAGES, LENIENT, BIAS, NOISE = 5, 1 / 3, 0.4, 0.6


def population(rng: np.random.Generator, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-query UMBRELA means by people and by the judge."""
    quality = rng.beta(2, 3, size=(queries, 1))
    people = rng.binomial(3, np.broadcast_to(quality, (queries, PASSAGES))).astype(float)
    lenient = rng.random(people.shape) < LENIENT
    judge = np.clip(np.where(lenient, people + BIAS, people + rng.normal(0, NOISE, people.shape)), 0, 3)
    return people.mean(axis=1), judge.mean(axis=1)


def repetitions(rng: np.random.Generator, queries: int, labelled: int, reps: int) -> dict[str, float]:
    covered = dict.fromkeys(("corrected", "judge", "people"), 0)
    width = dict.fromkeys(covered, 0.0)
    lam_total = 0.0
    for _ in range(reps):
        people, judge = population(rng, queries)
        chosen = np.zeros(queries, dtype=bool)
        chosen[rng.choice(queries, size=labelled, replace=False)] = True
        corrected, lam = ppi_mean(people[chosen], judge[chosen], judge[~chosen])
        intervals = {"corrected": corrected, "judge": normal_mean(judge), "people": normal_mean(people[chosen])}
        for name, interval in intervals.items():
            covered[name] += interval.low <= TRUTH <= interval.high
            width[name] += interval.width
        lam_total += lam
    return {**{f"cover_{k}": v / reps for k, v in covered.items()}, **{f"width_{k}": v / reps for k, v in width.items()},
            "lam": lam_total / reps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--labelled", type=int, action="append", help="labelled queries (repeatable; default 50, "
                        "100, 200)")
    parser.add_argument("--reps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    print(f"population mean (truth) {TRUTH:.2f}; judge +{BIAS} on {LENIENT:.0%} of passages, noise sd {NOISE} "
          f"elsewhere; {args.queries} queries, {args.reps} repetitions, seed {args.seed}")
    print("| labelled | coverage corrected | coverage judge-only | coverage people-only | width corrected "
          "| width people-only | width judge-only | mean lambda |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for labelled in args.labelled or [50, 100, 200]:
        r = repetitions(rng, args.queries, labelled, args.reps)
        print(f"| {labelled} | {r['cover_corrected']:.1%} | {r['cover_judge']:.1%} | {r['cover_people']:.1%} "
              f"| {r['width_corrected']:.3f} | {r['width_people']:.3f} | {r['width_judge']:.3f} | {r['lam']:.2f} |")


if __name__ == "__main__":
    main()
