"""Dispersion statistics, flip and crossing rates, Krippendorff's alpha (hand-computed and cross-checked)."""

from __future__ import annotations

import math
import random

import pytest

from open_rag_eval.scoring.dispersion import (
    crossing_rate,
    dispersion,
    flip_rate,
    krippendorff_alpha,
)


def test_dispersion_literal_numbers() -> None:
    stats = dispersion([1.0, 2.0, 4.0])
    assert stats["mean"] == pytest.approx(7 / 3)
    assert stats["median"] == 2.0
    assert stats["std"] == pytest.approx(math.sqrt(7 / 3))  # squares 16/9 + 1/9 + 25/9 = 42/9, over n - 1 = 2
    assert stats["cv"] == pytest.approx(math.sqrt(7 / 3) / (7 / 3))
    assert stats["iqr"] == pytest.approx(1.5)  # quartiles 1.5 and 3.0
    assert (stats["min"], stats["max"]) == (1.0, 4.0)


def test_dispersion_four_values_and_constant() -> None:
    stats = dispersion([0.2, 0.4, 0.4, 1.0])
    assert stats["median"] == pytest.approx(0.4)
    assert stats["iqr"] == pytest.approx(0.55 - 0.35)
    constant = dispersion([0.5, 0.5])
    assert constant["std"] == 0.0 and constant["cv"] == 0.0 and constant["iqr"] == 0.0


def test_dispersion_undefined_parts_are_none() -> None:
    single = dispersion([3.0])
    assert single["std"] is None and single["cv"] is None and single["iqr"] is None
    assert single["mean"] == 3.0
    assert dispersion([0.0, 0.0])["cv"] is None  # zero mean: cv undefined, not 0 or inf
    with pytest.raises(ValueError):
        dispersion([])


def test_flip_and_crossing_rates() -> None:
    items = {"p1": [3, 3, 3], "p2": [1, 2, 2], "p3": [0, 1, None], "p4": [2, None, None]}
    assert flip_rate(items) == pytest.approx(2 / 3)  # p4 has one label: not pairable
    assert crossing_rate(items, lambda grade: grade >= 2) == pytest.approx(1 / 3)  # only p2 crosses 2
    assert flip_rate({"x": [None, None]}) is None


def test_alpha_hand_computed_nominal() -> None:
    # units (a,a), (b,b), (a,b): o_aa = o_bb = 2, o_ab = o_ba = 1, n_a = n_b = 3, n = 6
    # alpha = 1 - (n - 1) * 2 / (2 * 3 * 3) = 1 - 10/18 = 4/9
    assert krippendorff_alpha({1: ["a", "a"], 2: ["b", "b"], 3: ["a", "b"]}) == pytest.approx(4 / 9)
    # units (a,a), (a,b): n_a = 3, n_b = 1, n = 4: alpha = 1 - 3 * 2 / 6 = 0
    assert krippendorff_alpha({1: ["a", "a"], 2: ["a", "b"]}) == pytest.approx(0.0)
    assert krippendorff_alpha({1: ["a", "a"], 2: ["b", "b"]}) == pytest.approx(1.0)
    assert krippendorff_alpha({1: ["a", "a"], 2: ["a", "a"]}) is None  # no variation: undefined


def test_alpha_hand_computed_ordinal() -> None:
    # units (0,0), (1,2), (2,2): o_00 = 2, o_12 = o_21 = 1, o_22 = 2; n_0 = 2, n_1 = 1, n_2 = 3, n = 6
    # delta(0,1) = (2 + 1 - 1.5)^2 = 2.25, delta(0,2) = (6 - 2.5)^2 = 12.25, delta(1,2) = (4 - 2)^2 = 4
    # observed = 2 * 4 = 8; expected = 2 * (2*1*2.25 + 2*3*12.25 + 1*3*4) = 2 * 90 = 180
    # alpha = 1 - 5 * 8 / 180 = 7/9
    assert krippendorff_alpha({1: [0, 0], 2: [1, 2], 3: [2, 2]}, "ordinal") == pytest.approx(7 / 9)


# Krippendorff's textbook example (4 coders, 12 units, one missing-heavy unit); published values 0.743 / 0.815
_CODERS = [
    [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
    [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
    [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
    [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
]


def _units(coders: list[list[int | None]]) -> dict[int, list[int | None]]:
    return {unit: [coder[unit] for coder in coders] for unit in range(len(coders[0]))}


def test_alpha_textbook_example() -> None:
    assert krippendorff_alpha(_units(_CODERS), "nominal") == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(_units(_CODERS), "ordinal") == pytest.approx(0.815, abs=5e-4)


@pytest.mark.parametrize("level", ["nominal", "ordinal"])
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_alpha_matches_the_krippendorff_package(level: str, seed: int) -> None:
    krippendorff = pytest.importorskip("krippendorff")
    np = pytest.importorskip("numpy")
    rng = random.Random(seed)
    coders = [[rng.choice([0, 1, 2, 3, None]) if rng.random() < 0.9 else None for _ in range(15)] for _ in range(3)]
    ours = krippendorff_alpha(_units(coders), level)  # type: ignore[arg-type]
    data = np.array([[np.nan if v is None else v for v in coder] for coder in coders], dtype=float)
    theirs = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
    assert ours == pytest.approx(float(theirs), abs=1e-9)
