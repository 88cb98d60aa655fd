"""The PPI++ estimator (scoring/ppi.py): literal numbers worked by hand, and the method authors' package."""

from __future__ import annotations

import math

import numpy as np
import ppi_py
import pytest

from open_rag_eval.scoring.ppi import Z95, normal_mean, power_tuning, ppi_estimate, ppi_mean

# 4 labelled queries, 4 unlabelled: worked by hand in the comments
Y = [1.0, 0.0, 1.0, 0.0]
YHAT = [1.0, 1.0, 1.0, 0.0]
UNLABELLED = [1.0, 1.0, 0.0, 0.0]


def test_power_tuning_by_hand() -> None:
    # cov(y, yhat) (divisor n) = 0.125; var of all 8 judge values (divisor n-1) = 1.875 / 7; 1 + n/N = 2
    assert power_tuning(Y, YHAT, UNLABELLED) == pytest.approx(7 / 30, abs=1e-15)


def test_corrected_mean_and_interval_by_hand() -> None:
    corrected, lam = ppi_mean(Y, YHAT, UNLABELLED)
    assert lam == pytest.approx(7 / 30, abs=1e-15)
    # 7/30 * 0.5 + mean(y - 7/30 yhat) = 0.5 - 7/120
    assert corrected.value == pytest.approx(53 / 120, abs=1e-12)
    # lam^2 var(u)/N = 49/14400; var(y - lam yhat)/n = 2907/57600
    half = Z95 * math.sqrt(3103) / 240
    assert corrected.low == pytest.approx(53 / 120 - half, abs=1e-12)
    assert corrected.high == pytest.approx(53 / 120 + half, abs=1e-12)


def test_the_other_intervals_by_hand() -> None:
    estimate = ppi_estimate(Y, YHAT, UNLABELLED)
    assert estimate.judge.value == pytest.approx(5 / 8)  # 5 of the 8 judge values are 1
    assert estimate.judge.high - estimate.judge.value == pytest.approx(Z95 * math.sqrt(15 / 64) / math.sqrt(8))
    assert estimate.people.value == 0.5
    assert estimate.people.low == pytest.approx(0.5 - Z95 * 0.5 / 2)
    assert estimate.bias.value == 0.25  # the judge said 1 where people said 0 once in 4
    assert estimate.bias.high == pytest.approx(0.25 + Z95 * math.sqrt(3 / 16) / 2)
    assert (estimate.n_labelled, estimate.n_unlabelled) == (4, 4)
    assert estimate.corrected.width < estimate.people.width


def test_lam_zero_is_the_people_only_interval_and_one_plain_ppi() -> None:
    people, _ = ppi_mean(Y, YHAT, UNLABELLED, lam=0.0)
    assert people == normal_mean(Y)
    plain, lam = ppi_mean(Y, YHAT, UNLABELLED, lam=1.0)
    assert lam == 1.0
    assert plain.value == pytest.approx(0.5 + (0.5 - 0.75))  # mean(u) + mean(y - yhat)


def test_a_constant_judge_carries_no_information() -> None:
    corrected, lam = ppi_mean([3.0, 1.0, 2.0], [2.0, 2.0, 2.0], [2.0] * 10)
    assert lam == 0.0
    assert corrected == normal_mean([3.0, 1.0, 2.0])


def test_no_unlabelled_unit_is_the_people_only_estimate() -> None:
    corrected, lam = ppi_mean([3.0, 1.0], [2.0, 1.0], [])
    assert (lam, corrected) == (0.0, normal_mean([3.0, 1.0]))
    with pytest.raises(ValueError, match="only lam = 0"):
        ppi_mean([3.0, 1.0], [2.0, 1.0], [], lam=1.0)


def test_too_few_labels_or_unequal_arrays_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        ppi_mean([1.0], [1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="3 people's values but 2"):
        ppi_mean([1.0, 2.0, 3.0], [1.0, 2.0], [1.0])


def _umbrela_like(seed: int, n: int, big_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-query UMBRELA means of 5 graded passages: people's grades, a judge +0.4 on a third, noisy elsewhere."""
    rng = np.random.default_rng(seed)
    truth = rng.integers(0, 4, size=(n + big_n, 5)).astype(float)
    judge = np.clip(truth + np.where(rng.random(truth.shape) < 1 / 3, 0.4, rng.normal(0, 0.5, truth.shape)), 0, 3)
    return truth[:n].mean(1), judge[:n].mean(1), judge[n:].mean(1)


def _f1_like(seed: int, n: int, big_n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Citation F1 per query in [0, 1], the judge lenient by about 0.1."""
    rng = np.random.default_rng(seed)
    truth = rng.beta(2, 2, size=n + big_n)
    judge = np.clip(truth + 0.1 + rng.normal(0, 0.15, n + big_n), 0, 1)
    return truth[:n], judge[:n], judge[n:]


@pytest.mark.parametrize("arrays", [_umbrela_like(1, 50, 950), _umbrela_like(2, 12, 40), _f1_like(3, 100, 900),
                                    _f1_like(4, 30, 3)], ids=["umbrela-50", "umbrela-12", "f1-100", "f1-30-of-33"])
def test_equal_to_the_method_authors_package(arrays: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    y, yhat, unlabelled = arrays
    corrected, lam = ppi_mean(y, yhat, unlabelled)
    low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05)
    point = ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled)
    assert 0.0 < lam < 1.0
    assert abs(corrected.low - float(low[0])) < 1e-9 and abs(corrected.high - float(high[0])) < 1e-9
    assert abs(corrected.value - float(np.asarray(point).reshape(-1)[0])) < 1e-9
    for fixed in (0.0, 1.0, 0.37):
        mine, _ = ppi_mean(y, yhat, unlabelled, lam=fixed)
        low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05, lam=fixed)
        assert abs(mine.low - float(low[0])) < 1e-9 and abs(mine.high - float(high[0])) < 1e-9
    people, _ = ppi_mean(y, yhat, unlabelled, lam=0.0)
    assert people == normal_mean(y)
