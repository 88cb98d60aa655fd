"""Agreement statistics: hand-computed values, and the same numbers as scikit-learn and scipy."""

from __future__ import annotations

import random

import pytest

from open_rag_eval.calibration.agreement import cohen_kappa, confusion, kendall_tau
from open_rag_eval.calibration.compare import bootstrap

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn (the dev extra) is not installed")
scipy_stats = pytest.importorskip("scipy.stats", reason="scipy (the dev extra) is not installed")


def test_kappa_by_hand() -> None:
    # po = 4/5, pe = 2/5*3/5 + 3/5*2/5 = 12/25, kappa = (20/25 - 12/25) / (13/25) = 8/13
    assert cohen_kappa([1, 1, 0, 0, 1], [1, 0, 0, 0, 1], [0, 1]) == pytest.approx(8 / 13)
    assert cohen_kappa(["a", "b"], ["a", "b"], ["a", "b"]) == pytest.approx(1.0)


def test_weighted_kappa_by_hand() -> None:
    judge, human = [0, 1, 2, 2], [0, 2, 2, 1]
    # linear: observed 2/4, expected 14/16 -> 1 - 4/7; quadratic: observed 2/4, expected 22/16 -> 1 - 4/11
    assert cohen_kappa(judge, human, [0, 1, 2], "linear") == pytest.approx(3 / 7)
    assert cohen_kappa(judge, human, [0, 1, 2], "quadratic") == pytest.approx(7 / 11)


def test_kappa_is_undefined_when_chance_agreement_is_total() -> None:
    assert cohen_kappa([1, 1, 1], [1, 1, 1], [0, 1]) is None
    assert cohen_kappa([], [], [0, 1]) is None


def test_confusion_rows_are_the_first_rater() -> None:
    assert confusion([0, 0, 1, 2], [0, 1, 1, 0], [0, 1, 2]) == [[1, 1, 0], [0, 1, 0], [1, 0, 0]]
    with pytest.raises(ValueError, match="not one of"):
        confusion([5], [0], [0, 1])


def test_tau_by_hand() -> None:
    assert kendall_tau([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(2 / 3)  # 5 concordant, 1 discordant
    assert kendall_tau([1, 2, 2, 3], [1, 2, 3, 3]) == pytest.approx(4 / 5)  # tau-b: 4 / sqrt(5 * 5)
    assert kendall_tau([1, 2], [2, 1]) == pytest.approx(-1.0)
    assert kendall_tau([1, 1, 1], [1, 2, 3]) is None
    assert kendall_tau([1], [1]) is None


@pytest.mark.parametrize("seed", range(40))
def test_kappa_matches_scikit_learn(seed: int) -> None:
    rng = random.Random(seed)
    labels = [0, 1, 2, 3]
    n = rng.randint(2, 40)
    skew = rng.random()
    judge = [rng.choice(labels) for _ in range(n)]
    human = [j if rng.random() < skew else rng.choice(labels) for j in judge]
    for weights in (None, "linear", "quadratic"):
        ours = cohen_kappa(judge, human, labels, weights)
        theirs = sklearn_metrics.cohen_kappa_score(judge, human, labels=labels, weights=weights)
        if ours is None:
            assert theirs != theirs or theirs == 0.0  # nan (0/0) where ours is undefined
        else:
            assert ours == pytest.approx(theirs, abs=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_tau_matches_scipy(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 15)
    x = [rng.randint(0, 4) for _ in range(n)]  # small ranges: ties on both sides
    y = [rng.randint(0, 4) for _ in range(n)]
    ours = kendall_tau(x, y)
    theirs = scipy_stats.kendalltau(x, y).statistic
    if ours is None:
        assert theirs != theirs  # nan
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)


def test_bootstrap_is_seeded_and_brackets_the_statistic() -> None:
    groups = [[1.0, 2.0], [3.0], [4.0, 5.0, 6.0], [2.0]]

    def mean(chosen: list[list[float]]) -> float:
        values = [v for g in chosen for v in g]
        return sum(values) / len(values)

    first = bootstrap(groups, mean, resamples=500, seed=3)
    assert first == bootstrap(groups, mean, resamples=500, seed=3)
    many = [[float(i), float(i * i % 7)] for i in range(15)]
    assert bootstrap(many, mean, resamples=300, seed=3) != bootstrap(many, mean, resamples=300, seed=4)
    low, high = first
    assert low is not None and high is not None and 1.0 <= low < mean(groups) < high <= 6.0
    assert bootstrap(groups[:1], mean) == (None, None)
    assert bootstrap(groups, lambda chosen: None) == (None, None)
