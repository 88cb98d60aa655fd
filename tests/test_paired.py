"""The paired test's draws: numpy gives, to the last bit, what the plain loop over ``random.Random(seed)`` gives
(the bootstrap CI of the mean difference and the sign-flip p-value), at sizes where ``randrange`` passes words over
(n = 3, 5, 1000) and where it never does (n = 1, 2, 16), and across the blocks resamples are drawn in."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest

from open_rag_eval.scoring import paired
from open_rag_eval.scoring.paired import paired_test


def _mean(values: Sequence[float]) -> float:
    total = 0.0
    for value in values:
        total += value
    return total / len(values)


def loop_test(a: list[float], b: list[float], seed: int, resamples: int) -> tuple[float, ...]:
    """The definition, one draw at a time."""
    diffs = [y - x for x, y in zip(a, b)]
    n, observed = len(diffs), _mean(diffs)
    rng = random.Random(seed)
    boots = sorted(_mean([diffs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    low, high = boots[int(0.025 * resamples)], boots[min(resamples - 1, int(0.975 * resamples))]
    extreme = sum(abs(_mean([d if rng.random() < 0.5 else -d for d in diffs])) >= abs(observed) - 1e-12
                  for _ in range(resamples))
    return n, _mean(a), _mean(b), observed, low, high, (extreme + 1) / (resamples + 1)


def _result(a: list[float], b: list[float], seed: int, resamples: int) -> tuple[float, ...]:
    r = paired_test(a, b, seed=seed, resamples=resamples)
    return r.n, r.mean_a, r.mean_b, r.diff, r.ci95_low, r.ci95_high, r.p_value


@pytest.mark.parametrize("n", [1, 2, 3, 5, 16, 1000])
@pytest.mark.parametrize("seed", [0, 7])
def test_the_same_bits_as_the_loop(n: int, seed: int) -> None:
    rng = random.Random(n * 31 + seed)
    a = [rng.random() for _ in range(n)]
    b = [x + rng.gauss(0.02, 0.1) for x in a]
    assert _result(a, b, seed, 999) == loop_test(a, b, seed, 999)


def test_blocks_smaller_than_the_resamples_change_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    a = [round(rng.random(), 1) for _ in range(37)]  # ties
    b = [round(x + rng.gauss(0, 0.2), 1) for x in a]
    monkeypatch.setattr(paired, "BLOCK_VALUES", 100)  # 2 resamples a block, 1 for the sign flips
    assert _result(a, b, 11, 501) == loop_test(a, b, 11, 501)


def test_literal_figures() -> None:
    r = paired_test([0.0, 0.5, 1.0, 0.5], [1.0, 1.0, 1.0, 0.5], seed=0, resamples=1000)
    assert (r.diff, r.ci95_low, r.ci95_high) == (0.375, 0.0, 0.75)
    assert r.p_value == pytest.approx(0.5, abs=0.04)  # diffs 1, 0.5, 0, 0: half the sign flips are as extreme
