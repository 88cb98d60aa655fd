import asyncio

import pytest
from pydantic import ValidationError

from open_rag_eval.core.errors import JudgeCallError, JudgeUnavailable
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.core.types import AnswerPart, EvalResult, Passage, RAGOutput, Score
from tests.trec_fakes import RuleJudge, default_rule, make_output


def _evaluate(outputs: list[RAGOutput], judge: RuleJudge, **options: object) -> EvalResult:
    evaluator = TrecEvaluator(TrecOptions(**options))  # type: ignore[arg-type]
    return asyncio.run(evaluator.evaluate(outputs, Context(judge=judge)))


def _values(result: EvalResult, run: int = 1, query_id: str = "q1") -> dict[str, float | None]:
    return {s.metric: s.value for s in result.scores if s.run == run and s.query_id == query_id}


def test_one_query_five_passages_is_few_calls_all_concurrent() -> None:
    judge = RuleJudge()
    result = _evaluate([make_output(n_statements=7)], judge)
    tasks = judge.tasks()
    assert {t: tasks.count(t) for t in set(tasks)} == {
        "umbrela": 5, "nugget_create": 1, "nugget_importance": 1, "nugget_assign": 1, "support": 7, "no_answer": 1}
    assert len(tasks) == 16 <= 18
    assert judge.max_in_flight >= 13  # UMBRELA, support and no-answer all in flight at once
    values = _values(result)
    assert values["umbrela.p@5"] == 1.0 and values["nuggets.vital_strict"] == 1.0
    assert values["citation.f1"] == 1.0 and values["no_answer.answered"] == 1.0
    assert {d.section for d in result.details} == {"umbrela", "nuggets", "citation", "no_answer"}


def test_creation_sees_only_passages_graded_at_least_min_grade_in_retrieval_order() -> None:
    grades = {"passage 1 ": 0, "passage 2 ": 3, "passage 3 ": 1, "passage 4 ": 2, "passage 5 ": 0}

    def rule(request: JudgeRequest) -> str | Exception:
        if request.task == "umbrela":
            grade = next(g for key, g in grades.items() if key in request.messages[-1][1])
            return f"##final score: {grade}"
        return default_rule(request)

    judge = RuleJudge(rule)
    result = _evaluate([make_output()], judge)
    create = next(c for c in judge.calls if c.task == "nugget_create").messages[-1][1]
    assert "Context:\n[1] passage 2 about x\n[2] passage 3 about x\n[3] passage 4 about x\nSearch Query" in create
    nuggets = next(d for d in result.details if d.section == "nuggets")
    assert nuggets.data["n_segments"] == 3 and nuggets.data["min_grade"] == 1
    judge = RuleJudge(rule)
    _evaluate([make_output()], judge, nuggets={"min_grade": 2})
    create = next(c for c in judge.calls if c.task == "nugget_create").messages[-1][1]
    assert "[1] passage 2 about x\n[2] passage 4 about x\nSearch Query" in create


def test_nugget_list_created_once_per_query_from_the_union_of_runs() -> None:
    run1 = make_output(run=1, n_passages=3)
    extra = Passage(id="p9", text="passage 9 about x")
    run2 = make_output(run=2, passages=(*run1.passages[1:], extra))
    judge = RuleJudge()
    result = _evaluate([run1, run2], judge)
    tasks = judge.tasks()
    assert tasks.count("nugget_create") == 1 and tasks.count("nugget_importance") == 1
    assert tasks.count("nugget_assign") == 2 and tasks.count("umbrela") == 4  # p1, p2, p3, p9 graded once each
    create = next(c for c in judge.calls if c.task == "nugget_create").messages[-1][1]
    assert "[1] passage 1 about x\n[2] passage 2 about x\n[3] passage 3 about x\n[4] passage 9 about x\n" in create
    assert _values(result, run=2)["nuggets.all"] == 1.0


def test_a_failed_call_affects_only_what_needed_it() -> None:
    def rule(request: JudgeRequest) -> str | Exception:
        user = request.messages[-1][1]
        if request.task == "umbrela" and "passage 5 " in user:
            return JudgeCallError("HTTP 500")
        if request.task == "support" and "Statement 2." in user:
            return JudgeCallError("HTTP 500")
        if request.task == "nugget_assign":
            return JudgeCallError("HTTP 500")
        return default_rule(request)

    result = _evaluate([make_output()], RuleJudge(rule))
    values = _values(result)
    errors = {s.metric: s.error for s in result.scores if s.error}
    assert values["umbrela.p@3"] == 1.0 and values["umbrela.mrr"] == 1.0 and values["umbrela.n_failed"] == 1
    assert "umbrela.p@5" in errors and "umbrela.mean" in errors
    assert values["citation.precision"] == 1.0 and values["citation.n_failed"] == 1
    assert "nuggets.vital" in errors and values["nuggets.n_failed"] == 3
    assert values["no_answer.answered"] == 1.0
    assert all(s.value != 0.5 for s in result.scores)


def test_judge_unavailable_stops_the_run() -> None:
    def rule(request: JudgeRequest) -> str | Exception:
        return JudgeUnavailable("authentication failed") if request.task == "support" else default_rule(request)

    with pytest.raises(JudgeUnavailable):
        _evaluate([make_output()], RuleJudge(rule))


def test_output_without_answer_gets_reasons_and_metrics_subset() -> None:
    broken = make_output(run=2, error="connector timed out")
    judge = RuleJudge()
    result = _evaluate([make_output(), broken], judge, metrics=["citation", "no_answer"])
    assert {s.metric for s in result.scores if s.run == 2} == {
        "citation.precision", "citation.recall", "citation.f1", "citation.precision_strict", "citation.recall_strict",
        "citation.f1_strict", "citation.fabricated", "citation.n_unparsed", "citation.n_failed",
        "citation.n_cited", "citation.n_unlabelled", "no_answer.answered"}
    assert all("connector timed out" in (s.error or "") for s in result.scores if s.run == 2)
    assert set(judge.tasks()) == {"support", "no_answer"}


def test_refusal_is_data() -> None:
    def rule(request: JudgeRequest) -> str | Exception:
        return "no" if request.task == "no_answer" else default_rule(request)

    refusal = make_output(answer=(AnswerPart(text="I cannot answer that."),))
    assert _values(_evaluate([refusal], RuleJudge(rule), metrics=["no_answer"]))["no_answer.answered"] == 0.0


def test_options_validation() -> None:
    with pytest.raises(ValidationError, match="valid choices: umbrela, nuggets, citation, no_answer, hhem"):
        TrecOptions(metrics=["umbrela", "rouge"])
    with pytest.raises(ValidationError):
        TrecOptions(umbrela={"prompt": "bing_magic"})  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        TrecOptions(nuggets={"max_reasks": 3})  # type: ignore[arg-type]
    assert TrecOptions(k_values=[5, 1, 5]).k_values == [1, 5]


class _FakeHallucination:
    seen: list[RAGOutput] = []

    def __init__(self, options: object) -> None:
        self.options = options

    async def score(self, outputs: list[RAGOutput]) -> EvalResult:
        _FakeHallucination.seen = list(outputs)
        return EvalResult(scores=[Score.ok(o, "hhem.score", 0.9) for o in outputs])


def test_hhem_gets_every_answered_output_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval.metrics import hallucination

    monkeypatch.setattr(hallucination, "HallucinationMetric", _FakeHallucination)
    outputs = [make_output(), make_output(run=2), make_output(run=3, error="down")]
    result = _evaluate(outputs, RuleJudge(), metrics=["hhem"], hallucination={"threshold": 0.4})
    assert [o.run for o in _FakeHallucination.seen] == [1, 2]
    assert {(s.run, s.metric, s.value) for s in result.scores if s.value is not None} == {
        (1, "hhem.score", 0.9), (2, "hhem.score", 0.9)}
    assert {s.metric for s in result.scores if s.run == 3} == {"hhem.score", "hhem.hallucinated"}


def test_judge_labels_sample_zero_is_the_normal_judgments() -> None:
    judge = RuleJudge()
    evaluator = TrecEvaluator()
    output = make_output()
    asyncio.run(evaluator.evaluate([output], Context(judge=judge)))
    normal = {(c.task, c.messages, c.sample) for c in judge.calls}
    labels = asyncio.run(evaluator.judge_labels(output, judge, 0))
    assert {(c.task, c.messages, c.sample) for c in judge.calls} == normal  # nothing new asked
    assert labels["umbrela"] == {f"p{i}": 2 for i in range(1, 6)}
    assert labels["support"] == {"0:p1": "FS", "1:p2": "FS", "2:p3": "FS"}
    assert labels["nugget_assignment"] == {"n1": "support", "n2": "support", "n3": "support"}
    assert labels["no_answer"] == {"answered": "yes"}
    before = len(judge.calls)
    asyncio.run(evaluator.judge_labels(output, judge, 1))
    assert {c.sample for c in judge.calls[before:]} == {1} and judge.tasks()[before:].count("nugget_create") == 0


def test_plan_estimates_calls() -> None:
    plan = TrecEvaluator().plan([make_output(n_statements=7)])
    # 5 grades, 1 creation window, 5 estimated nuggets (1 per passage): 1 importance and 1 assignment window,
    # 7 first citations, 1 no-answer
    assert {task: p.calls for task, p in plan.by_task().items()} == {
        "umbrela": 5, "nugget_create": 1, "nugget_importance": 1, "nugget_assign": 1, "support": 7, "no_answer": 1}
    assert 2000 < plan.total().prompt_tokens < 12000


def test_query_chunks_keep_the_runs_of_a_query_together() -> None:
    from open_rag_eval.evaluators.trec import query_chunks
    from tests.trec_fakes import make_output

    outputs = [make_output(query_id=q, run=r) for q, runs in (("a", 2), ("b", 3), ("c", 1)) for r in range(1, runs + 1)]
    chunks = query_chunks(outputs, 4)
    assert [[(o.query_id, o.run) for o in chunk] for chunk in chunks] == [
        [("a", 1), ("a", 2)], [("b", 1), ("b", 2), ("b", 3), ("c", 1)]]
    assert query_chunks(outputs, 1000) == [outputs]
