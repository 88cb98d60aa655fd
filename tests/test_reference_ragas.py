"""Our generation metrics against a recording of ragas 0.4.3's own scoring code (bench/ragas_reference.py: its
Faithfulness, ContextRecall, ContextPrecision, AnswerCorrectness, fbeta_score and ContextRelevance fed the verdicts
below, in tests/data/reference_ragas/formulas.json). Ours gets the same verdicts from a scripted judge through the
generation evaluator. Equal, or the departure docs/generation.md lists. Nothing here installs ragas."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pytest

from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.scoring.generation import ClaimCounts, blend, claim_f1
from tests.generation_fakes import Verdicts, judge, output

RECORDED = json.loads((Path(__file__).parent / "data" / "reference_ragas" / "formulas.json").read_text(encoding="utf-8"))
WORDS = ("alpha", "beta", "gamma", "delta", "epsilon")
PATTERNS = [list(p) for n in range(1, 6) for p in itertools.product([0, 1], repeat=n)]  # 62 verdict vectors
COUNTS = [c for c in itertools.product(range(4), repeat=3) if any(c)]  # 63 TP/FP/FN counts


def _values(rule: Verdicts, metrics: list[str], **changes: object) -> dict[str, float | None]:
    evaluator = GenerationEvaluator(GenerationOptions(metrics=metrics))
    result = asyncio.run(evaluator.evaluate([output(**changes)], Context(judge=judge(rule))))
    return {s.metric: s.value for s in result.scores}


def test_the_recording_holds_every_case() -> None:
    assert {name: len(values) for name, values in RECORDED.items()} == {
        "faithfulness": 63, "context_recall": 63, "context_precision": 62, "answer_correctness_f1": 63, "fbeta": 63,
        "blend": 3, "context_relevance": 4}


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: "".join(map(str, p)))
def test_faithfulness_recall_and_precision_equal_ragas(pattern: list[int]) -> None:
    key = "".join(map(str, pattern))
    supported = {WORDS[i] for i, v in enumerate(pattern) if v}

    def verdict(claim: str, sources: list[str]) -> list[int]:
        return [1] if claim.split()[0].lower() in supported else []

    text = " ".join(f"{WORDS[i].capitalize()} holds [1]." for i in range(len(pattern)))
    ours = _values(Verdicts(supported=verdict), ["faithfulness", "context_recall"], answer=text, reference=text)
    assert ours["faithfulness.score"] == pytest.approx(RECORDED["faithfulness"][key], abs=1e-12)
    assert ours["context.recall"] == pytest.approx(RECORDED["context_recall"][key], abs=1e-12)
    passages = [f"{WORDS[i]} passage" for i in range(len(pattern))]
    useful = {passages[i] for i, v in enumerate(pattern) if v}
    ours = _values(Verdicts(useful=lambda passage, answer: int(passage in useful)), ["context_precision"],
                   passages=passages)
    # ragas adds 1e-10 to the denominator (docs/generation.md): equal to 1e-9
    assert ours["context.precision_answer"] == pytest.approx(RECORDED["context_precision"][key], abs=1e-9)
    assert ours["context.precision_reference"] == pytest.approx(RECORDED["context_precision"][key], abs=1e-9)


@pytest.mark.parametrize(("tp", "fp", "fn"), COUNTS)
def test_claim_f1_equals_ragas_answer_correctness_and_fbeta(tp: int, fp: int, fn: int) -> None:
    ours = claim_f1(ClaimCounts(tp=tp, fp=fp, fn=fn, covered=0))["f1"]
    assert ours == pytest.approx(RECORDED["answer_correctness_f1"][f"{tp},{fp},{fn}"], abs=1e-12)
    assert ours == pytest.approx(RECORDED["fbeta"][f"{tp},{fp},{fn}"], abs=1e-12)


def test_blend_and_context_relevance_equal_ragas() -> None:
    for key, theirs in RECORDED["blend"].items():
        f1, similarity = map(float, key.split(","))
        assert blend(f1, similarity, (0.75, 0.25)) == pytest.approx(theirs, abs=1e-12)
    for key, theirs in RECORDED["context_relevance"].items():
        ratings = tuple(map(int, key.split(",")))
        assert _values(Verdicts(ratings=ratings), ["context_relevance"])["context.relevance"] == pytest.approx(theirs)


def test_no_claims_is_nan_in_ragas_and_missing_here() -> None:
    assert RECORDED["faithfulness"][""] is None and RECORDED["context_recall"][""] is None  # NaN in ragas
    ours = _values(Verdicts(), ["faithfulness"], answer="I don't know.")
    assert ours["faithfulness.score"] is None  # undefined, with its reason (docs/generation.md)
