"""Formula cross-check: fixed judge verdicts go through our metrics (the evaluator, with a rule judge) and through
the formula as ragas documents and implements it, written here independently -- the same number. Departures
(docs/generation.md) are asserted as departures."""

from __future__ import annotations

import asyncio
import itertools
import math

import numpy as np
import pytest

from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.scoring.generation import ClaimCounts, blend, claim_f1
from tests.generation_fakes import Verdicts, judge, output

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon")
PATTERNS = [list(p) for n in range(1, 6) for p in itertools.product([0, 1], repeat=n)]  # 62 verdict vectors


# --- ragas, as documented (docs.ragas.io concepts/metrics) and implemented (src/ragas/metrics) -------------------

def ragas_faithfulness(verdicts: list[int]) -> float:
    """Number of claims supported by the retrieved context / total number of claims (NaN without claims)."""
    return sum(verdicts) / len(verdicts) if verdicts else float("nan")


def ragas_average_precision(verdicts: list[int]) -> float:
    """sum_k (precision@k * v_k) / (number of relevant items + 1e-10)."""
    numerator = sum((sum(verdicts[: i + 1]) / (i + 1)) * verdicts[i] for i in range(len(verdicts)))
    return numerator / (sum(verdicts) + 1e-10)


def ragas_context_recall(attributed: list[int]) -> float:
    """Reference claims attributable to the retrieved context / claims in the reference."""
    return sum(attributed) / len(attributed) if attributed else float("nan")


def ragas_answer_correctness_f1(tp: int, fp: int, fn: int) -> float:
    return tp / (tp + 0.5 * (fp + fn)) if tp > 0 else 0


def ragas_fbeta(tp: int, fp: int, fn: int, beta: float = 1.0) -> float:
    precision = tp / (tp + fp + 1e-10)
    recall = tp / (tp + fn + 1e-10)
    return ((1 + beta**2) * precision * recall) / (beta**2 * precision + recall + 1e-10)


def ragas_context_relevance(rating1: float, rating2: float) -> float:
    scores = [r / 2.0 for r in (rating1, rating2) if not math.isnan(r)]
    return sum(scores) / len(scores) if scores else float("nan")


# --- our metrics on the same verdicts ------------------------------------------------------------------------

def _values(rule: Verdicts, metrics: list[str], **changes: object) -> dict[str, float | None]:
    evaluator = GenerationEvaluator(GenerationOptions(metrics=metrics))
    result = asyncio.run(evaluator.evaluate([output(**changes)], Context(judge=judge(rule))))
    return {s.metric: s.value for s in result.scores}


def _sentences(pattern: list[int]) -> str:
    return " ".join(f"{WORDS[i].capitalize()} holds [1]." for i in range(len(pattern)))


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: "".join(map(str, p)))
def test_faithfulness_and_context_recall_match_ragas(pattern: list[int]) -> None:
    supported = {WORDS[i] for i, v in enumerate(pattern) if v}

    def verdict(claim: str, sources: list[str]) -> list[int]:
        return [1] if claim.split()[0].lower() in supported else []

    text = _sentences(pattern)
    ours = _values(Verdicts(supported=verdict), ["faithfulness", "context_recall"], answer=text, reference=text)
    assert ours["faithfulness.score"] == pytest.approx(ragas_faithfulness(pattern), abs=1e-12)
    assert ours["context.recall"] == pytest.approx(ragas_context_recall(pattern), abs=1e-12)


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: "".join(map(str, p)))
def test_context_precision_matches_ragas(pattern: list[int]) -> None:
    passages = [f"{WORDS[i]} passage" for i in range(len(pattern))]
    useful = {passages[i] for i, v in enumerate(pattern) if v}
    rule = Verdicts(useful=lambda passage, answer: int(passage in useful))
    ours = _values(rule, ["context_precision"], passages=passages)
    # ragas adds 1e-10 to the denominator: equal to ~1e-9; with nothing useful both give 0
    assert ours["context.precision_answer"] == pytest.approx(ragas_average_precision(pattern), abs=1e-9)
    assert ours["context.precision_reference"] == pytest.approx(ragas_average_precision(pattern), abs=1e-9)


@pytest.mark.parametrize(("tp", "fp", "fn"), [c for c in itertools.product(range(4), repeat=3) if any(c)])
def test_answer_correctness_f1_matches_ragas_answer_correctness_and_factual_correctness(tp: int, fp: int,
                                                                                       fn: int) -> None:
    ours = claim_f1(ClaimCounts(tp=tp, fp=fp, fn=fn, covered=0))["f1"]
    assert ours == pytest.approx(ragas_answer_correctness_f1(tp, fp, fn), abs=1e-12)
    assert ours == pytest.approx(ragas_fbeta(tp, fp, fn), abs=1e-9)


def test_answer_correctness_through_the_evaluator_matches_ragas() -> None:
    # answer: alpha, beta, gamma; reference: alpha, delta -> tp 1 (alpha), fp 2, fn 1 (delta)
    def verdict(claim: str, sources: list[str]) -> list[int]:
        return [1] if claim.split()[0].lower() in sources[0].lower() else []

    ours = _values(Verdicts(supported=verdict), ["answer_correctness"], answer="Alpha holds. Beta holds. Gamma holds.",
                   reference="Alpha holds. Delta holds.")
    assert (ours["correctness.tp"], ours["correctness.fp"], ours["correctness.fn"]) == (1, 2, 1)
    assert ours["correctness.f1"] == pytest.approx(ragas_answer_correctness_f1(1, 2, 1)) == pytest.approx(0.4)


@pytest.mark.parametrize(("f1", "similarity"), [(0.4, 0.8), (0.0, 0.9), (1.0, 0.5)])
def test_blend_matches_ragas_weighted_average(f1: float, similarity: float) -> None:
    assert blend(f1, similarity, (0.75, 0.25)) == pytest.approx(float(np.average([f1, similarity],
                                                                                  weights=[0.75, 0.25])))


@pytest.mark.parametrize(("ratings", "expected_ragas"), [((2, 2), 1.0), ((2, 1), 0.75), ((0, 1), 0.25),
                                                         ((0, 0), 0.0)])
def test_context_relevance_matches_ragas(ratings: tuple[int, int], expected_ragas: float) -> None:
    ours = _values(Verdicts(ratings=ratings), ["context_relevance"])
    assert ours["context.relevance"] == pytest.approx(ragas_context_relevance(*ratings)) == expected_ragas


def test_departures_from_ragas_are_missing_values_not_numbers() -> None:
    # ragas: no claims -> NaN (faithfulness); both sides without claims -> 1.0 (answer correctness);
    # empty retrieved context -> 0.0 (context relevance). Ours: undefined, with the reason.
    assert math.isnan(ragas_faithfulness([]))
    ours = _values(Verdicts(), ["faithfulness", "answer_correctness", "context_relevance"], answer="I don't know.",
                   reference="I don't know.", passages=())
    assert ours["faithfulness.score"] is None and ours["correctness.f1"] is None and ours["context.relevance"] is None
    # ragas's precision with nothing useful: 0 / 1e-10 = 0; ours 0 too
    assert ragas_average_precision([0, 0]) == 0.0
