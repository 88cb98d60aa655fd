"""Rubric judges of the generation evaluator: literal scores, unparseable and out-of-range replies, undefined cases,
the simulated judge's replies, the dry-run plan and the CLI end to end."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.judge.sim_answer import reply, rubric_score
from open_rag_eval.metrics.rubric import RUBRICS, parse_rubric
from open_rag_eval.prompts import load
from open_rag_eval.scoring.rubric import normalise_rubric
from open_rag_eval.core.types import EvalResult, RAGOutput
from tests.generation_fakes import Verdicts, output
from tests.test_e2e_generation import _config, _rows
from tests.trec_fakes import RuleJudge

_CRITERION = re.compile(r"on one criterion: ([a-z ]+):")


def _by_criterion(scores: dict[str, object]) -> RuleJudge:
    claims = Verdicts()  # the claim extraction that tells a refusal: one claim per sentence, "don't know" refuses

    def rule(request: JudgeRequest) -> str | Exception:
        if request.task == "claim_extract":
            return claims(request)
        assert request.task == "rubric"
        name = _CRITERION.search(request.prompt).group(1).replace(" ", "_")  # type: ignore[union-attr]
        value = scores[name]
        return value if isinstance(value, str) else json.dumps({"reason": f"because {name}", "score": value})
    return RuleJudge(rule)


def _run(outputs: list[RAGOutput], rule: RuleJudge, **options: object) -> EvalResult:
    evaluator = GenerationEvaluator(GenerationOptions(metrics=["rubric"], **options))  # type: ignore[arg-type]
    return asyncio.run(evaluator.evaluate(outputs, Context(judge=rule)))


def _values(result: EvalResult) -> dict[str, object]:
    return {s.metric: s.value if s.error is None else s.error for s in result.scores}


@pytest.mark.parametrize(("text", "value"), [
    ('{"reason": "fine", "score": 7}', (7, "fine")),
    ('```json\n{"reason": "all  good", "score": 10}\n```', (10, "all good")),
    ('{"score": 0}', (0, "")),
    ('{"reason": "x", "score": 7.0}', (7, "x")),
    ('{"reason": "x", "score": 11}', None),  # out of range: never clipped
    ('{"reason": "x", "score": -1}', None),
    ('{"reason": "x", "score": 7.5}', None),
    ('{"reason": "x", "score": "7"}', None),
    ('{"reason": "x", "score": true}', None),
    ('{"reason": "x"}', None),
    ("7", None),  # the seed's bare number: not our format
    ("Score: 7", None),
])
def test_parse_rubric(text: str, value: object) -> None:
    assert parse_rubric(text).value == value


def test_normalise_rubric_literal_numbers_and_out_of_range() -> None:
    assert [normalise_rubric(s) for s in (0, 3, 7, 10)] == [0.0, 0.3, 0.7, 1.0]
    for bad in (-1, 11, 7.5, True):
        with pytest.raises(ValueError, match="whole number from 0 to 10"):
            normalise_rubric(bad)  # type: ignore[arg-type]


def test_five_rubrics_one_call_each_normalised_with_reasons() -> None:
    rule = _by_criterion({"faithfulness": 8, "relevance": 10, "completeness": 6, "coherence": 9,
                          "citation_accuracy": 3})
    result = _run([output()], rule)
    assert rule.tasks() == ["claim_extract"] + ["rubric"] * 5
    assert _values(result) == {"rubric.faithfulness": 0.8, "rubric.relevance": 1.0, "rubric.completeness": 0.6,
                               "rubric.coherence": 0.9, "rubric.citation_accuracy": 0.3}
    rows = next(d.data for d in result.details if d.section == "rubric")["rubrics"]
    assert rows[4] == {"rubric": "citation_accuracy", "status": "ok", "parse": "clean", "score": 3,
                       "reason": "because citation_accuracy"}
    prompts = {_CRITERION.search(c.prompt).group(1): c.prompt for c in rule.calls
               if c.task == "rubric"}  # type: ignore[union-attr]
    assert "Sources:\n[1] alpha passage\n[2] beta passage\n" in prompts["citation accuracy"]
    assert "Answer: Alpha is one [1]. Beta is two [2].\n" in prompts["citation accuracy"]
    assert "Sources:" not in prompts["coherence"] and "Question: what are alpha and beta\n" in prompts["relevance"]


def test_an_unparseable_reply_is_asked_once_more_then_missing_never_half() -> None:
    rule = _by_criterion({"faithfulness": "I would say 7 out of 10.", "relevance": '{"reason": "x", "score": 12}',
                          "completeness": 5, "coherence": 5, "citation_accuracy": 5})
    result = _run([output()], rule)
    values = _values(result)
    assert rule.tasks().count("rubric") == 7  # two re-asks
    assert str(values["rubric.faithfulness"]).startswith("rubric faithfulness failed:")
    assert str(values["rubric.relevance"]).startswith("rubric relevance failed:")
    assert values["rubric.completeness"] == 0.5  # a real 5/10, judged
    assert 0.5 not in (values["rubric.faithfulness"], values["rubric.relevance"])


def test_undefined_cases_ask_nothing() -> None:
    rule = _by_criterion(dict.fromkeys(RUBRICS, 10))
    result = _run([output(query_id="a", answer="Alpha is one. Beta is two."),
                   output(query_id="b", passages=()), output(query_id="c", answer="")], rule)
    by = {(s.query_id, s.metric): s.value if s.error is None else s.error for s in result.scores}
    assert by[("a", "rubric.citation_accuracy")] == "is undefined: the answer cites no retrieved passage"
    assert by[("a", "rubric.faithfulness")] == 1.0
    assert by[("b", "rubric.faithfulness")] == "is undefined: no passages were retrieved"
    assert by[("b", "rubric.citation_accuracy")] == "is undefined: no passages were retrieved"
    assert by[("b", "rubric.coherence")] == 1.0
    assert all(by[("c", f"rubric.{n}")] == "is undefined: the answer is empty" for n in RUBRICS)
    # a: all but citation accuracy; b's relevance, completeness and coherence prompts are a's (its citations name
    # no retrieved passage, so its answer reads the same): judged once
    assert rule.tasks().count("rubric") == 4


def test_rubric_selection_and_a_bad_name() -> None:
    rule = _by_criterion(dict.fromkeys(RUBRICS, 4))
    result = _run([output()], rule, rubric={"rubrics": ["coherence"]})
    assert _values(result) == {"rubric.coherence": 0.4}
    with pytest.raises(ValueError, match="unknown: tone"):
        GenerationOptions(metrics=["rubric"], rubric={"rubrics": ["tone"]})  # type: ignore[arg-type]


def test_the_simulated_judge_answers_every_rubric_prompt() -> None:
    for name in RUBRICS:
        fields = {"question": "What causes tides?", "answer": "The Moon causes tides [1]. Tides rise daily"}
        if name in ("faithfulness", "citation_accuracy"):
            fields["sources"] = "[1] The Moon causes tides."
        text = load(f"generation.rubric_{name}").render(**fields)
        got = reply([("user", text)])
        assert got.kind == "rubric" and got.query == "What causes tides?"
        value = json.loads(got.text)
        assert parse_rubric(got.text).value == (value["score"], value["reason"])
    # literal overlap: answer words {moon, cause, tides, rise, daily}; 3 of 5 in the source -> 6
    assert rubric_score("faithfulness", "q", "The Moon causes tides. Tides rise daily", "The Moon causes tides.") == 6
    assert rubric_score("coherence", "q", "One sentence. Another one", "") == 5
    assert rubric_score("relevance", "What causes tides?", "The Moon causes tides.", "") == 10


def test_rubrics_through_the_cli_and_the_dry_run(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    extra = "    metrics: [rubric]\n"
    assert main(["-q", "eval", "--config", str(_config(tmp_path, "r", extra))]) == 0
    rows = _rows(tmp_path, "r")
    values = [float(r["rubric.coherence"]) for r in rows.values() if r["rubric.coherence"]]
    assert values and all(0 <= v <= 1 and round(v * 10, 9) == int(round(v * 10)) for v in values)
    with (tmp_path / "r" / "summary.csv").open(encoding="utf-8") as handle:
        assert any(r["metric"] == "rubric.faithfulness" for r in csv.DictReader(handle))
    capfd.readouterr()
    assert main(["eval", "--config", str(_config(tmp_path, "d", extra)), "--dry-run"]) == 0
    assert "rubric" in capfd.readouterr().out


def test_a_statement_that_is_only_its_citations_is_shown_as_its_marks() -> None:
    from open_rag_eval.core.types import AnswerPart

    answer = (AnswerPart(text="", citations=("p1",)), AnswerPart(text="Alpha is one.", citations=("p2",)))
    rule = _by_criterion(dict.fromkeys(RUBRICS, 6))
    given = output().model_copy(update={"answer": answer, "answer_text": "[p1] Alpha is one. [p2]"})
    result = _run([given], rule, rubric={"rubrics": ["citation_accuracy"]})
    assert _values(result) == {"rubric.citation_accuracy": 0.6}  # judged, no crash on the empty statement
    prompt = next(c.prompt for c in rule.calls if c.task == "rubric")
    assert "Answer: [1] Alpha is one [2].\n" in prompt
