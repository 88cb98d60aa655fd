"""A run's summary reads each metric's values as a typed array (8 bytes a value): the same aggregate, to the bit,
as from a list of the same values."""

from __future__ import annotations

import random
from array import array

from open_rag_eval.scoring.stats import aggregate


def _bits(values: list[float] | array[float]) -> dict[str, str]:
    return {name: repr(value) for name, value in aggregate("m", values, 2, (0.0, 1.0)).as_dict().items()}


def test_an_array_of_values_aggregates_as_their_list_does_zeros_signs_and_all() -> None:
    rng = random.Random(7)
    for n in (1, 2, 29, 30, 1000, 20_000):
        values = [rng.choice((0.0, -0.0, 0.0, 1.0, 0.25, -0.0)) for _ in range(n)]
        assert _bits(array("d", values)) == _bits(values), n

