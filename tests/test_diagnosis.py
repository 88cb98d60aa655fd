"""Diagnosis rules over literal metric means: which rule fires at which threshold (the defaults of the tools they come from), rules whose
metric is missing are reported as not checked and never fire, configured thresholds / metrics / disabled rules, the
judge's health first, and the advice shown in the console summary and report.html."""

from __future__ import annotations

import fnmatch

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from open_rag_eval.cli import main
from open_rag_eval.config import load_config
from open_rag_eval.diagnosis import RULES, DiagnosisOptions, diagnose, diagnosis_lines, options_from_manifest
from open_rag_eval.core.errors import ConfigError

UNHEALTHY = {"healthy": False, "tasks": {"claim_verify": {}, "umbrela": {}},
             "problems": ["claim_verify: 40% of replies fell back", "umbrela: 30% of grades invalid"]}


def _fired(means: dict[str, float | None], **options: object) -> list[str]:
    return [f.rule for f in diagnose(means, DiagnosisOptions.model_validate(options)).findings]


def test_researchmate_retrieval_thresholds() -> None:
    assert _fired({"golden.hit@10": 0.42, "golden.mrr": 0.30}) == ["low_recall"]
    assert _fired({"golden.hit@10": 0.50, "golden.mrr": 0.30}) == []  # "< 0.50": the bound itself is not poor
    assert _fired({"golden.hit@10": 0.60, "golden.mrr": 0.19}) == ["low_mrr"]
    assert _fired({"golden.hit@10": 0.60, "golden.mrr": 0.20}) == []
    # high Recall@10 with low MRR: ranked too low, which says more than low_mrr (replaced)
    assert _fired({"golden.hit@10": 0.85, "golden.mrr": 0.15}) == ["ranked_too_low"]
    assert _fired({"golden.hit@10": 0.85, "golden.mrr": 0.39}) == ["ranked_too_low"]
    assert _fired({"golden.hit@10": 0.80, "golden.mrr": 0.39}) == []  # "> 0.80" is ResearchMate's good bound


def test_researchmate_groundedness() -> None:
    assert _fired({"lexical.ungrounded": 0.25}) == ["low_groundedness"]
    assert _fired({"lexical.ungrounded": 0.0}) == []
    both = {"golden.hit@10": 0.9, "golden.mrr": 0.8, "lexical.ungrounded": 0.25}
    assert _fired(both) == ["good_retrieval_bad_generation"]  # good retrieval, bad generation replaces the general one


def test_guide_threshold_for_generation_metrics() -> None:
    means = {"context.relevance": 0.69, "faithfulness.score": 0.70, "context.precision_reference": 0.5,
             "context.precision_answer": 0.9}
    assert _fired(means) == ["low_context_relevance", "low_context_precision"]  # 0.70 is not below 0.7
    # the reference variant is read first; without it, the answer variant
    assert _fired({"context.precision_answer": 0.5}) == ["low_context_precision"]
    assert _fired({"lexical.keyword_coverage": 0.5}) == ["low_keyword_coverage"]


def test_rubric_columns_are_read() -> None:
    # the columns the rubric judges write: every rule on them fires (a review found only completeness did)
    means = {"rubric.relevance": 0.2, "rubric.faithfulness": 0.1, "rubric.completeness": 0.2}
    assert _fired(means) == ["low_faithfulness", "low_answer_relevance", "low_completeness"]
    assert _fired({"answer_relevance.judged": 0.5}) == ["low_answer_relevance"]


def test_each_criterion_of_the_users_under_its_threshold_is_a_finding() -> None:
    means = {"criteria.tone": 0.5, "criteria.effective_date": 0.9, "criteria.names_policy": 0.25, "criteria.x": None}
    findings = [f for f in diagnose(means).findings if f.rule == "low_criterion"]
    assert [f.text.split("(")[1].split(" ")[0] for f in findings] == ["criteria.names_policy", "criteria.tone"]
    assert "criteria.tone = 0.500 < 0.7" in findings[1].text
    unhealthy = {"healthy": False, "problems": ["criteria: 30% of replies invalid"], "tasks": {"criteria": {}}}
    doubted = [f for f in diagnose(means, health=unhealthy).findings if f.rule == "low_criterion"]
    assert len(doubted) == 2 and all("criteria" in f.uncertain for f in doubted)


def _declared() -> set[str]:
    """Every column the evaluators declare, with every metric and variant selected."""
    from open_rag_eval.evaluators.generation import METRICS, GenerationEvaluator, GenerationOptions
    from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
    from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions

    generation = GenerationOptions.model_validate({"metrics": list(METRICS),
                                                   "answer_relevance": {"variants": ["embedding", "judged"]}})
    from open_rag_eval.evaluators.criteria import CriteriaEvaluator, CriteriaOptions

    trec = TrecOptions(metrics=["umbrela", "nuggets", "citation", "no_answer", "hhem"])
    criteria = CriteriaOptions.model_validate({"criteria": [{"name": "tone", "question": "Polite?"}]})
    return {*GenerationEvaluator.metric_names(generation), *GoldenEvaluator.metric_names(GoldenOptions()),
            *TrecEvaluator.metric_names(trec), *CriteriaEvaluator.metric_names(criteria)}


def test_every_rule_reads_columns_an_evaluator_writes() -> None:
    declared = _declared()
    unknown = [f"{rule.name}: {metric}" for rule in RULES for check in rule.checks for metric in check.metrics
               if not fnmatch.filter(declared, metric)]  # criteria.*: the user's names, any criteria column
    assert not unknown, f"rules read columns no evaluator writes: {unknown}"


GENERATION_RULES = ("low_context_relevance", "low_context_precision", "low_faithfulness", "low_answer_relevance",
                    "low_completeness")


@pytest.mark.parametrize("metrics", [
    {"metrics": ["faithfulness", "context_precision", "context_relevance", "answer_relevance"],
     "answer_relevance": {"variants": ["judged"]}},
    {"metrics": ["rubric"]},
    {"metrics": ["rag_guide"]},
])
def test_generation_rules_read_a_real_run_on_the_simulated_judge(metrics: dict[str, object]) -> None:
    import asyncio

    from open_rag_eval.evaluators.base import Context
    from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
    from open_rag_eval.judge.sim_answer import answer
    from open_rag_eval.run.results import summarize
    from tests.generation_fakes import output
    from tests.trec_fakes import RuleJudge

    evaluator = GenerationEvaluator(GenerationOptions.model_validate(metrics))
    outputs = [output(), output("q2", answer="Gamma is three [1].", passages=("gamma is three",))]
    result = asyncio.run(evaluator.evaluate(outputs, Context(judge=RuleJudge(lambda r: answer(r.messages)))))
    means = {a.metric: a.mean for a in summarize(result.scores)}
    checks = {f"{rule.name}.{check.name}": 1.01 for rule in RULES if rule.name in GENERATION_RULES
              for check in rule.checks}
    found = diagnose(means, DiagnosisOptions(thresholds=checks))  # every value is under 1.01: each rule read fires
    fired = {f.rule: f.text for f in found.findings}
    read = [name for name in GENERATION_RULES if name in fired]
    expected = {"faithfulness": GENERATION_RULES[:4], "rubric": GENERATION_RULES[2:],
                "rag_guide": GENERATION_RULES[:4]}[metrics["metrics"][0]]  # type: ignore[index]
    assert tuple(read) == expected, (fired, dict(found.unchecked))
    assert all(any(f"{metric} = " in fired[name] for metric in means) for name in read)  # the run's own column
    unchecked = dict(found.unchecked)
    assert all("has no value" not in unchecked.get(name, "") for name in GENERATION_RULES)


def test_finding_text_names_the_numbers_advice_and_source() -> None:
    (finding,) = diagnose({"golden.hit@10": 0.85, "golden.mrr": 0.15}).findings
    assert finding.area == "ranking"
    assert finding.text == ("relevant passages are found but ranked too low (golden.hit@10 = 0.850 > 0.8, golden.mrr "
                            "= 0.150 < 0.4): tune the retriever's scoring, consider a reranker")
    assert finding.source.startswith("ResearchMate") and finding.uncertain == ""


def test_missing_or_undefined_metrics_never_fire_and_are_reported() -> None:
    found = diagnose({"golden.hit@10": None, "golden.mrr": 0.1})
    assert [f.rule for f in found.findings] == ["low_mrr"]
    unchecked = dict(found.unchecked)
    assert unchecked["low_recall"] == "golden.hit@10 has no value (every value failed or is undefined)"
    assert unchecked["low_faithfulness"] == \
        "faithfulness.score / rubric.faithfulness / rag_guide.faithfulness is not in this run"
    assert unchecked["low_context_precision"] == \
        "context.precision_reference / context.precision_answer / rag_guide.context_precision is not in this run"
    assert "ranked_too_low" in unchecked  # the MRR is low but Recall@10 is unknown: not guessed
    # decided without the missing metric: Recall@10 is not high, so MRR is not needed to know it does not fire
    found = diagnose({"golden.hit@10": 0.5})
    assert "ranked_too_low" not in dict(found.unchecked) and not found.findings
    assert dict(found.unchecked)["low_mrr"] == "golden.mrr is not in this run"
    assert float("nan") and _fired({"golden.hit@10": float("nan")}) == []  # not a number: no value


def test_configured_thresholds_metrics_and_disabled_rules() -> None:
    means = {"golden.hit@10": 0.55, "golden.hit@5": 0.35, "golden.mrr": 0.3}
    assert _fired(means) == []
    assert _fired(means, thresholds={"low_recall.recall": 0.6}) == ["low_recall"]
    found = diagnose(means, DiagnosisOptions(metrics={"low_recall.recall": "golden.hit@5"}))
    assert [f.rule for f in found.findings] == ["low_recall"] and "golden.hit@5 = 0.350 < 0.5" in found.findings[0].text
    assert _fired({"golden.hit@10": 0.1}, disable=["low_recall"]) == []
    off = diagnose({"golden.hit@10": 0.1}, DiagnosisOptions(enabled=False))
    assert off.findings == [] and off.unchecked == [] and diagnosis_lines(off) == ["diagnosis: off (diagnosis.enabled "
                                                                                   "is false)"]
    assert _fired({"umbrela.mean": 0.6}) == ["trec_relevance"]
    assert _fired({"umbrela.mean": 0.6}, thresholds={"trec_relevance.umbrela": 0.5}) == []
    assert _fired({"umbrela.mean": 0.6}, disable=["trec_relevance"]) == []


def test_options_are_checked() -> None:
    with pytest.raises(ValidationError, match="unknown rule 'low_recal'; valid: low_recall, low_mrr"):
        DiagnosisOptions(disable=["low_recal"])
    with pytest.raises(ValidationError, match="unknown check 'low_recall.mrr'"):
        DiagnosisOptions(thresholds={"low_recall.mrr": 0.3})
    with pytest.raises(ValidationError, match="finite"):
        DiagnosisOptions(thresholds={"low_recall.recall": float("inf")})
    assert options_from_manifest({"config": {"diagnosis": {"disable": ["low_mrr"]}}}).disable == ["low_mrr"]
    assert options_from_manifest({"config": {"diagnosis": {"disable": ["renamed"]}}}) == DiagnosisOptions()
    assert options_from_manifest({}) == DiagnosisOptions()
    assert len({rule.name for rule in RULES}) == len(RULES)


def test_config_section_errors_name_the_yaml_path(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text("input: x.jsonl\nevaluators: [{type: golden}]\ndiagnosis: {thresholds: {low_recall.x: 1}}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert caught.value.path == "diagnosis.thresholds" and "unknown check 'low_recall.x'" in caught.value.problem


def test_unhealthy_judge_comes_first_and_doubts_only_judged_metrics() -> None:
    found = diagnose({"faithfulness.score": 0.4, "golden.hit@10": 0.3, "umbrela.mean": 0.5}, health=UNHEALTHY)
    assert found.judge is not None and "claim_verify, umbrela" in found.judge
    notes = {f.rule: f.uncertain for f in found.findings}
    assert notes["low_faithfulness"] == "uncertain: the judge's claim_verify replies are unhealthy"
    assert notes["low_recall"] == ""  # labels, not a judge: never doubted
    assert notes["trec_relevance"] == "uncertain: the judge's umbrela replies are unhealthy"
    lines = diagnosis_lines(found)
    assert lines[1].startswith("  ! judge: the judge's replies are unhealthy") and "(low_recall; ResearchMate" in lines[2]
    assert diagnose({"faithfulness.score": 0.4}, health={"healthy": True, "tasks": {}}).judge is None
    # the rubric and the RAG guide's columns rest on their own judge tasks
    guide = {"healthy": False, "tasks": {"rag_guide_verify": {}}, "problems": ["rag_guide_verify: 50% invalid"]}
    notes = {f.rule: f.uncertain for f in diagnose({"rag_guide.faithfulness": 0.4, "rubric.completeness": 0.2},
                                                    health=guide).findings}
    assert notes == {"low_faithfulness": "uncertain: the judge's rag_guide_verify replies are unhealthy",
                     "low_completeness": ""}


def _outputs(tmp_path: Path) -> Path:
    rows = [{"query_id": f"q{i}", "query": f"question {i}", "passages": [{"id": "other", "text": "unrelated words"}],
             "answer": "Made up facts entirely.", "relevant_ids": ["gold"]} for i in range(3)]
    path = tmp_path / "outputs.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_console_and_report_show_the_diagnosis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _outputs(tmp_path)
    config = tmp_path / "c.yaml"
    config.write_text("input: outputs.jsonl\noutput_dir: out\nevaluators: [{type: golden, k_values: [1, 10]}]\n"
                      "diagnosis: {disable: [low_mrr]}\n", encoding="utf-8")
    assert main(["eval", "--config", str(config)]) == 0
    printed = capsys.readouterr().out
    assert "diagnosis (docs/diagnosis.md" in printed
    assert "- retrieval: few queries find a relevant passage in the top 10 (golden.hit@10 = 0.000 < 0.5)" in printed
    assert "- grounding: some answers are ungrounded" in printed and "low_mrr" not in printed
    assert "rules need metrics this run does not measure (report.html names them)" in printed
    assert "low_context_relevance" not in printed  # named in the report only
    report = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert 'data-rule="low_recall"' in report and 'data-rule="low_groundedness"' in report
    assert 'data-rule="low_mrr"' not in report and 'id="unchecked"' in report and "low_faithfulness" in report
    assert "not measured in this run: " in report and "low_context_relevance" in report
