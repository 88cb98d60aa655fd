"""Refusals across the generation metrics (docs/generation.md, "Refusals"): a refusal on an answerable query is
graded as an answer that gives nothing (correctness and completeness 0), never as a perfect one (faithfulness,
relevance: undefined, with the reason); on a query labelled unanswerable it is the right answer."""

from __future__ import annotations

import asyncio
import json

from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.core.types import EvalResult, Labels, RAGOutput
from tests.generation_fakes import Verdicts, output
from tests.trec_fakes import RuleJudge

METRICS = ["faithfulness", "context_precision", "context_recall", "answer_correctness", "rubric"]
REFUSAL = "is undefined for a refusal: the answer declines to answer and makes no claim (see no_answer.answered)"


def _judge(rubric: int = 9, extraction: str | None = None) -> RuleJudge:
    """Claims by ``Verdicts`` ("don't know" refuses), every rubric graded ``rubric``; ``extraction``: a fixed
    extraction reply instead."""
    verdicts = Verdicts()

    def rule(request: JudgeRequest) -> str | Exception:
        if request.task == "rubric":
            return json.dumps({"reason": "judged", "score": rubric})
        if request.task == "claim_extract" and extraction is not None:
            return extraction
        return verdicts(request)
    return RuleJudge(rule)


def _run(outputs: list[RAGOutput], rule: RuleJudge, metrics: list[str] = METRICS) -> EvalResult:
    evaluator = GenerationEvaluator(GenerationOptions(metrics=metrics))
    return asyncio.run(evaluator.evaluate(outputs, Context(judge=rule)))


def _values(result: EvalResult, query_id: str) -> dict[str, object]:
    return {s.metric: s.value if s.error is None else s.error for s in result.scores if s.query_id == query_id}


def _rubric_rows(result: EvalResult, query_id: str) -> dict[str, dict[str, object]]:
    data = next(d.data for d in result.details if d.section == "rubric" and d.query_id == query_id)
    return {row["rubric"]: row for row in data["rubrics"]}


def test_a_refusal_on_an_answerable_query_is_a_wrong_answer_never_a_perfect_one() -> None:
    rule = _judge()
    result = _run([output(query_id="a", answer="I don't know.")], rule)
    values = _values(result, "a")
    # nothing claimed: faithfulness and the answer's context precision are not applicable, not 1.0
    for name in ("faithfulness.score", "faithfulness.cited", "context.precision_answer"):
        assert values[name] == REFUSAL
    assert values["faithfulness.n_claims"] == 0
    # the reference's one claim is missed: F1 = 0 / (0 + (0 + 1) / 2) = 0, recall 0 / 1 = 0
    assert (values["correctness.f1"], values["correctness.recall"]) == (0.0, 0.0)
    assert (values["correctness.tp"], values["correctness.fp"], values["correctness.fn"]) == (0, 0, 1)
    # rubrics: nothing the question asked is given (completeness 0), nothing claimed (faithfulness, relevance,
    # citation accuracy undefined), the text itself still judged (coherence 9/10)
    assert values["rubric.completeness"] == 0.0
    for name in ("rubric.faithfulness", "rubric.relevance", "rubric.citation_accuracy"):
        assert values[name] == REFUSAL
    assert values["rubric.coherence"] == 0.9
    assert rule.tasks().count("rubric") == 1  # coherence alone was asked
    rows = _rubric_rows(result, "a")
    assert rows["completeness"] == {"rubric": "completeness", "status": "refusal", "score": 0,
                                    "reason": "a refusal on a query taken to be answerable: it gives nothing the "
                                              "question asks for"}
    # retrieval is judged apart from the answer
    assert values["context.recall"] == 1.0 and values["context.precision_reference"] == 1.0


def test_a_refusal_where_one_is_expected_is_the_right_answer() -> None:
    expected = Labels(expected_refusal=True)  # no reference_answer needed
    rule = _judge()
    result = _run([output(query_id="u", answer="I don't know.", labels=expected)], rule,
                  metrics=["faithfulness", "answer_correctness", "rubric"])
    values = _values(result, "u")
    assert values["faithfulness.score"] == REFUSAL
    assert (values["correctness.f1"], values["correctness.recall"]) == (1.0, 1.0)
    assert values["correctness.precision"] == "is undefined: the answer makes no factual claim"
    assert (values["correctness.tp"], values["correctness.fp"], values["correctness.fn"]) == (0, 0, 0)
    assert values["rubric.completeness"] == 1.0 and values["rubric.coherence"] == 0.9
    assert values["rubric.relevance"] == REFUSAL
    assert _rubric_rows(result, "u")["completeness"]["score"] == 10
    assert rule.tasks().count("claim_verify") == 0  # nothing to verify: no reference is read


def test_an_answer_where_a_refusal_is_expected_has_only_false_positives() -> None:
    expected = Labels(expected_refusal=True, reference_answer="Alpha is one.")  # the label wins over the reference
    result = _run([output(query_id="u", answer="Alpha is one [1]. Beta is two [2].", labels=expected)], _judge(),
                  metrics=["answer_correctness"])
    values = _values(result, "u")
    # tp 0, fp 2, fn 0: F1 = 0 / (0 + 2/2) = 0, precision 0/2 = 0, recall undefined
    assert (values["correctness.tp"], values["correctness.fp"], values["correctness.fn"]) == (0, 2, 0)
    assert (values["correctness.f1"], values["correctness.precision"]) == (0.0, 0.0)
    assert values["correctness.recall"] == ("is undefined: a refusal is expected (expected_refusal: true), which "
                                            "claims nothing to cover")
    detail = next(d.data for d in result.details if d.section == "correctness")
    assert detail["correct_refusal"] is False and [c["supported"] for c in detail["answer"]["claims"]] == [False] * 2


def test_a_failed_extraction_leaves_refusal_unknown_and_every_rubric_judged() -> None:
    rule = _judge(rubric=4, extraction="not json")
    result = _run([output(query_id="f", answer="I don't know.")], rule, metrics=["rubric", "answer_correctness"])
    values = _values(result, "f")
    assert values["rubric.completeness"] == 0.4 and values["rubric.relevance"] == 0.4
    assert values["rubric.citation_accuracy"] == "is undefined: the answer cites no retrieved passage"
    assert str(values["correctness.f1"]).startswith("claim extraction failed:")  # missing, never 0
    assert next(d.data for d in result.details if d.section == "rubric")["refusal"] is None
    # expected_refusal with a failed extraction: missing with the failure's reason too
    failed = _run([output(query_id="g", answer="x.", labels=Labels(expected_refusal=True))], rule,
                  metrics=["answer_correctness"])
    assert all(str(v).startswith("claim extraction failed:") for v in _values(failed, "g").values())


def test_only_coherence_selected_asks_no_extraction() -> None:
    rule = _judge()
    evaluator = GenerationEvaluator(GenerationOptions(metrics=["rubric"], rubric={"rubrics": ["coherence"]}))
    result = asyncio.run(evaluator.evaluate([output(answer="I don't know.")], Context(judge=rule)))
    assert rule.tasks() == ["rubric"] and [s.value for s in result.scores] == [0.9]
