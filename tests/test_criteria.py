"""Criteria in plain language (``type: criteria``): the pure scale arithmetic with literal numbers, scripted replies,
failures and re-asks, evaluation steps, the log-probability form, the simulated judge end to end through the CLI,
the dry run, test-retest and the config's errors."""

from __future__ import annotations

import asyncio
import csv
import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.core.types import EvalResult, RAGOutput
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.criteria import CriteriaEvaluator, CriteriaOptions
from open_rag_eval.judge.base import Completion, JudgeRequest
from open_rag_eval.judge.sim_answer import criterion_grade, reply
from open_rag_eval.metrics.criteria import parse_criterion, parse_steps
from open_rag_eval.scoring.criteria import SCALES, normalise, weighted_grade
from tests.trec_fakes import RuleJudge

DATA = Path(__file__).parent / "data" / "generation_outputs.jsonl"
_NAME = re.compile(r"^Criterion \(([a-z0-9_]+)\)", re.M)


def _outputs() -> list[RAGOutput]:
    from open_rag_eval.inputs import read_outputs  # noqa: PLC0415

    return [o for o in read_outputs(DATA) if o.query_id in ("seasons", "tides")]


def _evaluator(**options: Any) -> CriteriaEvaluator:
    criteria = options.pop("criteria", [
        {"name": "names_cause", "question": "Does the answer name the cause?"},
        {"name": "tone", "question": "Is the tone suitable for a customer?", "scale": "1-5",
         "anchors": {"1": "rude", "5": "warm and clear"}},
        {"name": "detail", "description": "How detailed is the answer?", "scale": "0-10", "sources": False},
    ])
    return CriteriaEvaluator(CriteriaOptions.model_validate({"criteria": criteria, **options}))


class Raw(str):
    """A reply sent as it is (not wrapped in the JSON the prompt asks for)."""


def _by_name(replies: dict[str, object]) -> RuleJudge:
    def rule(request: JudgeRequest) -> str | Exception:
        user = request.prompt
        name = _NAME.search(user).group(1)  # type: ignore[union-attr]
        if request.task == "criteria_steps":
            return json.dumps({"steps": [f"check {name}", "decide"]})
        value = replies[name]
        return value if isinstance(value, Raw) else json.dumps({"reason": f"because {name}", "score": value})
    return RuleJudge(rule)


def _values(result: EvalResult) -> dict[tuple[str, int | None, str], object]:
    return {(s.query_id, s.run, s.metric): s.value if s.error is None else s.error for s in result.scores}


# ------------------------------------------------------------------ pure arithmetic


def test_scales_map_grades_onto_zero_to_one_with_literal_numbers() -> None:
    assert [normalise(SCALES["yes_no"], g) for g in (0, 1)] == [0.0, 1.0]
    assert [normalise(SCALES["1-5"], g) for g in (1, 2, 3, 5)] == [0.0, 0.25, 0.5, 1.0]
    assert [normalise(SCALES["0-10"], g) for g in (0, 7, 10)] == [0.0, 0.7, 1.0]
    assert SCALES["yes_no"].grade(" Yes ") == 1 and SCALES["1-5"].grade("4") == 4
    with pytest.raises(ValueError):
        normalise(SCALES["1-5"], 0)
    with pytest.raises(ValueError):
        SCALES["yes_no"].grade("maybe")


def test_weighted_grade_is_the_probability_weighted_mean_over_the_scale() -> None:
    # p(3) = 0.5, p(4) = 0.3, p(5) = 0.1, "x" off the scale ignored, renormalised over 0.9: (1.5 + 1.2 + 0.5) / 0.9
    alternatives = [("3", math.log(0.5)), ("4", math.log(0.3)), ("5", math.log(0.1)), ("x", math.log(0.1))]
    assert weighted_grade(SCALES["1-5"], alternatives) == pytest.approx(3.2 / 0.9)
    assert normalise(SCALES["1-5"], 3.2 / 0.9) == pytest.approx(0.638889, abs=1e-6)  # docs/criteria.md's example
    assert weighted_grade(SCALES["yes_no"], [("yes", math.log(0.8)), ('"no', math.log(0.2))]) == pytest.approx(0.8)
    assert weighted_grade(SCALES["1-5"], [("x", 0.0)]) is None
    assert weighted_grade(SCALES["1-5"], []) is None


@pytest.mark.parametrize(("scale", "text", "value"), [
    ("yes_no", '{"reason": "it does", "score": "yes"}', (1, "it does")),
    ("yes_no", '{"reason": "no", "score": "NO"}', (0, "no")),
    ("yes_no", '{"reason": "x", "score": true}', None),  # a JSON boolean is not the word the prompt asks for
    ("yes_no", '{"reason": "x", "score": 1}', None),
    ("1-5", '{"reason": "ok", "score": 4}', (4, "ok")),
    ("1-5", '{"reason": "ok", "score": 4.0}', (4, "ok")),
    ("1-5", '{"reason": "ok", "score": 0}', None),  # off the scale: never clipped
    ("1-5", '{"reason": "ok", "score": 4.5}', None),
    ("0-10", '{"reason": "ok", "score": "7"}', (7, "ok")),
    ("0-10", "7", None),
    ("0-10", '{"reason": ["x"], "score": 7}', None),
])
def test_parse_criterion(scale: str, text: str, value: object) -> None:
    assert parse_criterion(SCALES[scale])(text).value == value


def test_parse_steps() -> None:
    assert parse_steps('{"steps": ["a  b", "c"]}').value == ("a b", "c")
    assert parse_steps('{"steps": []}').value is None
    assert parse_steps('{"steps": ["a", 3]}').value is None
    assert parse_steps("1. a\n2. b").value is None


# ------------------------------------------------------------------ scripted replies


def test_each_criterion_one_call_per_output_with_literal_values_and_reasons() -> None:
    judge = _by_name({"names_cause": "yes", "tone": 4, "detail": 7})
    result = asyncio.run(_evaluator().evaluate(_outputs(), Context(judge=judge)))
    values = _values(result)
    assert values[("seasons", 1, "criteria.names_cause")] == 1.0
    assert values[("seasons", 1, "criteria.tone")] == 0.75
    assert values[("seasons", 1, "criteria.detail")] == 0.7
    assert judge.tasks().count("criteria") == 3 * len(_outputs())
    detail = next(d for d in result.details if d.section == "criteria" and d.query_id == "seasons" and d.run == 1)
    rows = detail.data["criteria"]
    assert rows[1] == {"criterion": "tone", "scale": "1-5", "status": "ok", "parse": "clean", "grade": 4,
                       "reason": "because tone", "scoring": "label"}
    prompt = next(c.prompt for c in judge.calls if "Criterion (tone)" in c.prompt)
    assert "where 1 = rude; 5 = warm and clear." in prompt and "Question: What causes the seasons on Earth?" in prompt
    assert "[1] The seasons are caused by the tilt" in prompt
    detail_prompt = next(c.prompt for c in judge.calls if "Criterion (detail)" in c.prompt)
    assert "(not shown for this criterion)" in detail_prompt and "where 0 = does not meet" in detail_prompt


def test_an_unparseable_reply_is_asked_once_more_then_missing_with_its_reason() -> None:
    judge = _by_name({"names_cause": Raw("perhaps"), "tone": Raw('{"reason": "x", "score": 9}'), "detail": 3})
    result = asyncio.run(_evaluator().evaluate(_outputs()[:1], Context(judge=judge)))
    values = _values(result)
    assert str(values[("seasons", 1, "criteria.names_cause")]).startswith("criterion names_cause failed:")
    assert str(values[("seasons", 1, "criteria.tone")]).startswith("criterion tone failed:")
    assert values[("seasons", 1, "criteria.detail")] == pytest.approx(0.3)
    assert judge.tasks().count("criteria") == 5  # two failing criteria asked twice, one answered at once


def test_an_empty_answer_is_undefined_and_asks_nothing() -> None:
    empty = _outputs()[0].model_copy(update={"answer": []})
    judge = _by_name({})
    result = asyncio.run(_evaluator().evaluate([empty], Context(judge=judge)))
    assert judge.calls == []
    assert all("empty" in str(v) for v in _values(result).values())


def test_evaluation_steps_are_asked_once_per_criterion_and_sent_with_every_judgment() -> None:
    judge = _by_name({"names_cause": "no", "tone": 2, "detail": 10})
    result = asyncio.run(_evaluator(evaluation_steps=True).evaluate(_outputs(), Context(judge=judge)))
    assert judge.tasks().count("criteria_steps") == 3
    tone = [c.prompt for c in judge.calls if c.task == "criteria" and "Criterion (tone)" in c.prompt]
    assert tone and all("Evaluation steps:\n1. check tone\n2. decide\n" in p for p in tone)
    rows = next(d for d in result.details if d.section == "criteria").data["criteria"]
    assert rows[0]["steps"] == ["check names_cause", "decide"]
    assert _values(result)[("seasons", 1, "criteria.tone")] == 0.25


def test_criteria_whose_steps_fail_are_missing_never_judged_without_them() -> None:
    def rule(request: JudgeRequest) -> str:
        return "not json" if request.task == "criteria_steps" else json.dumps({"reason": "r", "score": "yes"})
    judge = RuleJudge(rule)
    evaluator = _evaluator(evaluation_steps=True, criteria=[{"name": "a", "question": "Is it a?"}])
    result = asyncio.run(evaluator.evaluate(_outputs(), Context(judge=judge)))
    assert judge.tasks() == ["criteria_steps", "criteria_steps"]  # asked once, re-asked once, never per output
    assert all("evaluation steps of criterion a could not be had" in str(v) for v in _values(result).values())


class _LogprobJudge:
    """Replies with a grade and the log-probabilities of the reply's tokens (as an OpenAI server returns them)."""

    model, simulated = "logprobs", True

    def __init__(self, with_logprobs: bool) -> None:
        self.with_logprobs = with_logprobs
        self.params: list[dict[str, Any]] = []

    async def complete(self, request: JudgeRequest) -> Completion:
        self.params.append(dict(request.params))
        text = '{"reason": "fine", "score": 4}'
        if not self.with_logprobs:
            return Completion(text=text)
        tokens = [(t, ()) for t in ('{"', "reason", '":', ' "fine"', ', "', "score", '":')]
        tokens.append((" 4", ((" 4", math.log(0.6)), (" 5", math.log(0.2)), (" 3", math.log(0.2)))))
        return Completion(text=text, logprobs=(*tokens, ("}", ())))


@pytest.mark.parametrize("with_logprobs", [True, False])
def test_logprob_scoring_weights_the_grade_where_the_judge_returns_probabilities(with_logprobs: bool) -> None:
    judge = _LogprobJudge(with_logprobs)
    evaluator = _evaluator(scoring="logprobs", criteria=[{"name": "tone", "question": "Polite?", "scale": "1-5"}])
    result = asyncio.run(evaluator.evaluate(_outputs()[:1], Context(judge=judge)))
    assert judge.params[0]["logprobs"] is True and judge.params[0]["top_logprobs"] == 20
    row = next(d for d in result.details if d.section == "criteria").data["criteria"][0]
    value = _values(result)[("seasons", 1, "criteria.tone")]
    if with_logprobs:  # 0.6 * 4 + 0.2 * 5 + 0.2 * 3 = 4.0 -> (4 - 1) / 4
        assert row["scoring"] == "logprobs" and value == pytest.approx(0.75)
    else:
        assert row["scoring"].startswith("label (the judge returned no log-probabilities") and value == 0.75


# ------------------------------------------------------------------ the simulated judge and the CLI


def test_the_simulated_judge_answers_criteria_from_word_overlap() -> None:
    assert criterion_grade("Does the answer name the tilt of the axis?", "The tilt of Earth's axis.", None, None) == "yes"
    assert criterion_grade("Does the answer name the date?", "The tilt of Earth's axis.", None, None) == "no"
    assert criterion_grade("tilt axis orbit moon", "The tilt of the axis.", 1, 5) == 3  # share 0.5: 1 + 0.5 * 4


def _config(tmp_path: Path, extra: str = "", judge: str = "  cache: false\n  simulated: {seed: 1}\n") -> Path:
    shutil.copy(DATA, tmp_path / "outputs.jsonl")
    config = tmp_path / "criteria.yaml"
    config.write_text(
        "input: outputs.jsonl\noutput_dir: out\njudge:\n  model: simulated-judge\n" + judge +
        "evaluators:\n  - type: criteria\n    criteria:\n"
        "      - {name: tilt, question: 'Does the answer name the tilt of the axis?'}\n"
        "      - {name: moon_tides, question: 'Does the answer say the Moon pulls the tides?', scale: 0-10}\n"
        + extra,
        encoding="utf-8")
    return config


def test_criteria_end_to_end_through_the_cli_and_the_simulated_judge(tmp_path: Path) -> None:
    assert main(["-q", "eval", "--config", str(_config(tmp_path))]) == 0
    with (tmp_path / "out" / "results.csv").open(encoding="utf-8") as handle:
        rows = {(r["query_id"], r["run"]): r for r in csv.DictReader(handle)}
    assert rows[("seasons", "1")]["criteria.tilt"] == "1.0"
    assert rows[("tides", "1")]["criteria.tilt"] == "0.0"
    tides = rows[("tides", "1")]["criteria.moon_tides"]
    # the criterion's content words: answe, moon, pull, say, tide; the answer holds moon, pull, tide: 3/5 -> grade 6
    assert tides == "0.6"
    # the tilt criterion: answe, axi, name, tilt; the seasons answer holds tilt and axi: 2/4 = 0.5 -> yes
    assert rows[("empty", "1")]["criteria.tilt"] == "0.0"  # judged without passages: the boiling answer names no tilt
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert [c["name"] for c in manifest["criteria"]] == ["tilt", "moon_tides"]
    assert all(len(c["sha256"]) == 64 for c in manifest["criteria"])
    summary = (tmp_path / "out" / "summary.csv").read_text(encoding="utf-8")
    assert "criteria.tilt" in summary and "criteria.moon_tides" in summary


def test_the_dry_run_plans_every_criteria_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path)
    text = config.read_text(encoding="utf-8").replace("scale: 0-10}", "scale: 0-10}\n    evaluation_steps: true")
    config.write_text(text, encoding="utf-8")
    assert main(["eval", "--config", str(config), "--dry-run"]) == 0
    out = capsys.readouterr().out
    n_outputs = sum(1 for _ in DATA.open(encoding="utf-8"))
    answered = n_outputs  # every output of the file has an answer
    # and the criteria's controls (docs/judge-health.md): 3 pairs per criterion from 4 queries, 2 judgments a pair;
    # a high item whose answer carries no citation marker is the run's own request (asked once): 10 more calls
    controls = re.search(r"judge-health controls: (\d+) judgments", out)
    assert controls is not None and int(controls[1]) == 12, out
    assert re.search(rf"criteria\s+{2 * answered + 10}\b", out), out
    assert re.search(r"criteria_steps\s+2\b", out), out


def test_criteria_test_retest_and_its_config_check(tmp_path: Path) -> None:
    extra = "  - type: consistency\n    metrics: [dispersion]\n    judge_repeats: 3\n    retest: [criteria]\n"
    config = _config(tmp_path, extra, judge="  cache: false\n  simulated: {seed: 3, noise_rate: 0.3}\n")
    assert main(["-q", "eval", "--config", str(config)]) == 0
    with (tmp_path / "out" / "results.csv").open(encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert {"consistency.judge.criteria.flip_rate", "consistency.judge.criteria.alpha"} <= set(header)
    bad = tmp_path / "bad.yaml"
    bad.write_text("input: outputs.jsonl\noutput_dir: out2\njudge: {model: simulated-judge, cache: false}\n"
                   "evaluators:\n  - type: consistency\n    judge_repeats: 2\n    retest: [criteria]\n", encoding="utf-8")
    assert main(["-q", "eval", "--config", str(bad)]) == 2


@pytest.mark.parametrize(("criteria", "message"), [
    ([{"name": "Tone!", "question": "x?"}], "lower-case letters"),
    ([{"name": "a", "question": "  "}], "empty"),
    ([{"name": "a", "question": "x?", "scale": "1-5", "anchors": {"0": "bad"}}], "not on the 1-5 scale"),
    ([{"name": "a", "question": "x?"}, {"name": "a", "question": "y?"}], "given more than once"),
    ([{"name": "a", "question": "x?", "description": "y"}], "not both"),
    ([], "at least 1"),
])
def test_bad_criteria_are_refused_with_the_reason(criteria: list[dict[str, Any]], message: str) -> None:
    from pydantic import ValidationError  # noqa: PLC0415

    with pytest.raises(ValidationError, match=re.escape(message)):
        CriteriaOptions.model_validate({"criteria": criteria})


def test_anchors_read_from_yaml_keep_their_grades() -> None:
    import yaml  # noqa: PLC0415

    options = CriteriaOptions.model_validate(yaml.safe_load(
        "criteria:\n  - {name: a, question: q, scale: 1-5, anchors: {1: rude, 5: warm}}\n"
        "  - {name: b, question: q, anchors: {yes: names it, no: does not}}\n"))
    assert [c.spec().anchors for c in options.criteria] == [((1, "rude"), (5, "warm")),
                                                             ((0, "does not"), (1, "names it"))]


def test_the_simulated_reply_parses_on_every_scale() -> None:
    for scale, form in (("yes_no", ""), ("1-5", "Score the answer from 1 to 5 on this criterion only, where x."),
                        ("0-10", "Score the answer from 0 to 10 on this criterion only, where x.")):
        prompt = (f"You judge one answer of a question-answering system against one criterion that its developers "
                  f"wrote.\n\nCriterion (c): Does it name the tilt?\n\nQuestion: q\n\nSources:\n[1] s\n\n"
                  f"Answer: The tilt.\n\n{form or 'Answer yes if the answer meets the criterion.'}\n\nReply with one")
        assert parse_criterion(SCALES[scale])(reply([("user", prompt)]).text).value is not None, scale


def test_a_run_whose_every_criteria_judgment_fails_is_incomplete_exit_6(tmp_path: Path) -> None:
    config = _config(tmp_path, judge="  cache: false\n  simulated: {seed: 1, malformed_rate: 1.0}\n  max_retries: 0\n")
    assert main(["-q", "eval", "--config", str(config)]) == 6


def test_the_report_shows_each_criterion_with_its_reason_and_steps(tmp_path: Path) -> None:
    config = _config(tmp_path, "    evaluation_steps: true\n")
    assert main(["-q", "eval", "--config", str(config)]) == 0
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert '<table class="criteria">' in html and 'data-criterion="moon_tides"' in html
    assert "Read what criterion tilt asks of the answer." in html  # the simulated judge's steps
    assert "Simulated tilt from the overlap" in html



def test_a_criterion_judgment_counts_its_grade_as_its_label_for_judge_health() -> None:
    from open_rag_eval.core.labels import labels_of  # noqa: PLC0415

    assert labels_of("criteria", (4, "a reason")) == ("4",)
    assert labels_of("criteria_steps", ("step one", "step two")) == ()
