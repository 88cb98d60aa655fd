"""Pure scores of the generation metrics with literal numbers (docs/generation.md), edge cases included."""

import pytest

from open_rag_eval.scoring.generation import ClaimCounts, average_precision, blend, claim_f1, relevance, \
    supported_share


def test_supported_share_is_supported_over_claims_and_undefined_without_claims() -> None:
    assert supported_share([True, False, True]) == pytest.approx(2 / 3)
    assert supported_share([False, False]) == 0.0
    assert supported_share([True]) == 1.0
    assert supported_share([]) is None


@pytest.mark.parametrize(("useful", "expected"), [
    ([True, False, True], (1 / 1 + 2 / 3) / 2),  # 0.833333
    ([False, True, False, True], (1 / 2 + 2 / 4) / 2),  # 0.5
    ([True, True, True], 1.0),
    ([False, False, True], 1 / 3),
    ([False, False], 0.0),  # nothing useful: 0, not undefined
])
def test_average_precision_over_the_ranks_of_useful_passages(useful: list[bool], expected: float) -> None:
    assert average_precision(useful) == pytest.approx(expected)


def test_average_precision_without_passages_is_undefined() -> None:
    assert average_precision([]) is None


def test_claim_f1_literal_numbers() -> None:
    counts = ClaimCounts(tp=1, fp=2, fn=1, covered=1)
    assert claim_f1(counts) == pytest.approx({"precision": 1 / 3, "recall": 0.5, "f1": 0.4})
    assert claim_f1(ClaimCounts(tp=3, fp=0, fn=0, covered=2)) == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert claim_f1(ClaimCounts(tp=2, fp=0, fn=2, covered=2)) == pytest.approx(
        {"precision": 1.0, "recall": 0.5, "f1": 2 / 3})
    # ragas's f1 counts tp on the answer's side and fn on the reference's: an answer whose claims the reference does
    # not support scores 0 even when it covers the reference (recall 1.0 here)
    assert claim_f1(ClaimCounts(tp=0, fp=3, fn=0, covered=2)) == {"precision": 0.0, "recall": 1.0, "f1": 0.0}


def test_claim_f1_edge_cases_a_refusal_and_nothing_to_count() -> None:
    # a refusal against a reference with 3 claims: nothing claimed, everything missed
    assert claim_f1(ClaimCounts(tp=0, fp=0, fn=3)) == {"precision": None, "recall": 0.0, "f1": 0.0}
    # every answer claim wrong, the reference has none
    assert claim_f1(ClaimCounts(tp=0, fp=2, fn=0, covered=0)) == {"precision": 0.0, "recall": None, "f1": 0.0}
    assert claim_f1(ClaimCounts(tp=0, fp=0, fn=0)) == {"precision": None, "recall": None, "f1": None}


def test_blend_is_the_weighted_mean() -> None:
    assert blend(0.4, 0.8, (0.75, 0.25)) == pytest.approx(0.5)
    assert blend(0.4, 0.8, (3.0, 1.0)) == pytest.approx(0.5)  # weights need not sum to 1
    assert blend(0.4, 0.8, (1.0, 0.0)) == pytest.approx(0.4)


def test_relevance_is_the_mean_rating_over_the_scale() -> None:
    assert relevance([2, 1]) == pytest.approx(0.75)
    assert relevance([0, 0]) == 0.0
    assert relevance([None, 2]) == 1.0  # one judge failed: the other's rating
    assert relevance([None, None]) is None
