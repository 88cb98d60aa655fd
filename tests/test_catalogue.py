"""The metric catalogue: every column an evaluator writes is declared, docs/RESULTS.md shows exactly the catalogue,
the judged families are the ones the judge produces, and the readers (report, plot, diagnosis, headline) agree."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from open_rag_eval.core import catalogue
from open_rag_eval.core.catalogue import Column, Family

DOCS = Path(__file__).resolve().parent.parent / "docs" / "RESULTS.md"
BEGIN, END = "<!-- catalogue:begin -->", "<!-- catalogue:end -->"


def _every_declared_name() -> list[str]:
    """What the evaluators say they write, with every metric, variant, measure, statistic and retest kind on."""
    from open_rag_eval.evaluators.consistency import ConsistencyEvaluator, ConsistencyOptions
    from open_rag_eval.evaluators.criteria import CriteriaEvaluator, CriteriaOptions
    from open_rag_eval.evaluators.generation import METRICS, GenerationEvaluator, GenerationOptions
    from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
    from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
    from open_rag_eval.scoring.dispersion import ALL_STATS

    generation = GenerationOptions.model_validate({"metrics": list(METRICS), "context_precision": {
        "against": ["answer", "reference"]}, "answer_relevance": {"variants": ["embedding", "judged"]}})
    trec = TrecOptions(metrics=["umbrela", "nuggets", "citation", "no_answer", "hhem"], k_values=[1, 3, 5, 10, 20])
    before = [*TrecEvaluator.metric_names(trec), *GenerationEvaluator.metric_names(generation),
              *GoldenEvaluator.metric_names(GoldenOptions(k_values=[1, 5, 10])),
              *CriteriaEvaluator.metric_names(CriteriaOptions.model_validate(
                  {"criteria": [{"name": "effective_date", "question": "Does it name the date?"}]}))]
    consistency = ConsistencyOptions.model_validate({
        "rouge": {"measures": ["f1", "precision", "recall"]}, "stats": list(ALL_STATS), "judge_repeats": 2,
        "retest": ["trec", "generation", "criteria"], "generation": {"metrics": list(METRICS)}})
    spread = ConsistencyEvaluator.metric_names(consistency, before)
    assert spread is not None
    return [*before, *spread]


def test_every_column_an_evaluator_declares_is_in_the_catalogue() -> None:
    names = _every_declared_name()
    assert len(names) > 150  # the options above really switched everything on
    undeclared = [name for name in names if not catalogue.declared(name)]
    assert not undeclared, f"columns no catalogue family declares: {undeclared}"


def test_every_column_a_real_run_writes_is_in_the_catalogue() -> None:
    from open_rag_eval.evaluators.base import Context
    from open_rag_eval.evaluators.generation import METRICS, GenerationEvaluator, GenerationOptions
    from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
    from open_rag_eval.judge.sim_answer import answer
    from tests.generation_fakes import output
    from tests.trec_fakes import RuleJudge, make_output

    judged = [m for m in METRICS if m != "answer_similarity"]  # embeddings only: no model in tests
    generation = GenerationEvaluator(GenerationOptions.model_validate(
        {"metrics": judged, "answer_relevance": {"variants": ["judged"]}}))
    outputs = [output(), output("q2", answer="Gamma is three [1].", passages=("gamma is three",))]
    written = {s.metric for s in asyncio.run(generation.evaluate(
        outputs, Context(judge=RuleJudge(lambda r: answer(r.messages))))).scores}
    trec = TrecEvaluator(TrecOptions(metrics=["umbrela", "nuggets", "citation", "no_answer"], k_values=[1, 3]))
    written |= {s.metric for s in asyncio.run(trec.evaluate([make_output(), make_output("q2")],
                                                            Context(judge=RuleJudge()))).scores}
    assert {"rubric.coherence", "rag_guide.overall", "umbrela.p@3", "citation.n_unlabelled"} <= written
    assert not [m for m in written if not catalogue.declared(m)]


def test_docs_results_md_shows_exactly_the_catalogue() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert BEGIN in text and END in text
    shown = text.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert shown == catalogue.markdown_table(), (
        "docs/RESULTS.md and the metric catalogue disagree: paste open_rag_eval.core.catalogue.markdown_table() "
        "between the catalogue markers")


def test_judged_families() -> None:
    judged = {f.name for f in catalogue.families() if f.judged}
    assert judged == {"umbrela", "nuggets", "citation", "no_answer", "consistency.judge", "faithfulness", "context",
                      "correctness", "answer_relevance", "rag_guide", "rubric", "criteria"}
    assert catalogue.is_judged("rubric.coherence") and catalogue.is_judged("consistency.judge.umbrela.alpha")
    assert not catalogue.is_judged("consistency.umbrela.mean.std")  # a spread is computed, not judged
    assert not catalogue.is_judged("hhem.score") and not catalogue.is_judged("answer_similarity.score")


def test_patterns_directions_ranges() -> None:
    assert catalogue.declared("umbrela.ndcg@20") and not catalogue.declared("umbrela.ndcg")
    assert catalogue.axis_range("umbrela.mean") == (0.0, 3.0)
    assert catalogue.axis_range("consistency.umbrela.mean.median") == (0.0, 3.0)  # in the metric's own units
    assert catalogue.axis_range("consistency.umbrela.mean.std") is None and catalogue.axis_range("latency.ms") is None
    assert catalogue.lower_is_better("citation.fabricated") and catalogue.lower_is_better("consistency.x.y.cv")
    assert catalogue.lower_is_better("consistency.citation.fabricated.mean")  # a spread's mean keeps its direction
    assert not catalogue.lower_is_better("citation.f1")
    assert catalogue.is_tally("umbrela.n_failed") and not catalogue.is_tally("citation.n_cited")
    assert catalogue.family("consistency.judge.support.flip_rate") == "consistency.judge"
    assert catalogue.family("consistency.citation.f1.std") == "spread"
    assert catalogue.display_name("golden.hit@5") == "Hit rate @5 (queries with a relevant result)"
    # results.csv's column order: families in catalogue order, unknown ones after, naturally within
    assert catalogue.metric_order(["rubric.x", "zz.a", "umbrela.p@10", "umbrela.p@3", "consistency.judge.a.b",
                                   "answer_relevance.score", "citation.f1"]) == [
        "umbrela.p@3", "umbrela.p@10", "citation.f1", "consistency.judge.a.b", "answer_relevance.score", "rubric.x",
        "zz.a"]


def test_one_nuggets_metric_everywhere() -> None:
    # the headline card, plot, diagnosis and the drill-down name the same nuggets metric: TREC 2024's primary score
    from open_rag_eval.diagnosis import RULES
    from open_rag_eval.report.drilldown import KEY_METRICS
    from open_rag_eval.report.headline import DEFAULT_HEADLINE

    nuggets = {m for m in (*DEFAULT_HEADLINE, *catalogue.plot_defaults("trec"), *KEY_METRICS,
                           *catalogue.plot_defaults("consistency"),
                           *(n for r in RULES for c in r.checks for n in c.metrics)) if m.startswith("nuggets.")}
    assert nuggets == {"nuggets.vital_strict", "nuggets.weighted"}
    assert DEFAULT_HEADLINE[:2] == ("umbrela.mean", "nuggets.vital_strict")


def test_registering_a_family_is_one_declaration() -> None:
    new = Family("zz_test", "A test family", "for this test", (Column("zz_test.score@k", "a score", lower=True),),
                 judged=True)
    catalogue.register(new)
    try:
        assert catalogue.declared("zz_test.score@5") and catalogue.is_judged("zz_test.score@5")
        assert catalogue.lower_is_better("zz_test.score@5") and catalogue.family_title("zz_test") == "A test family"
        with pytest.raises(ValueError, match="registered already"):
            catalogue.register(new)
    finally:
        catalogue._REGISTRY.pop("zz_test")
        catalogue._lookup.cache_clear()
    with pytest.raises(ValueError, match="must start with"):
        catalogue.register(Family("zz_bad", "t", "d", (Column("other.x", "d"),)))


def test_intervals_are_clipped_to_what_each_metric_can_take() -> None:
    # the lexical shares got intervals above 1 (1.028) when a separate list of ranges forgot them
    from open_rag_eval.scoring.stats import aggregate

    values = [1.0] * 97 + [0.0] * 3  # enough values for the t interval (small samples are bootstrapped)
    for metric in ("lexical.grounded", "lexical.keyword_coverage", "rubric.coherence", "criteria.tone",
                   "answer_relevance.judged", "rag_guide.overall", "golden.hit@10"):
        assert catalogue.value_bounds(metric) == (0.0, 1.0), metric
        stats = aggregate(metric, values, bounds=catalogue.value_bounds(metric))
        assert stats.ci95_high is not None and stats.ci95_high <= 1.0, metric
    unclipped = aggregate("lexical.grounded", values)
    assert unclipped.ci95_high is not None and unclipped.ci95_high > 1.0  # the case the bound exists for
    assert catalogue.value_bounds("consistency.judge.umbrela.alpha") is None  # alpha can go below 0
    assert catalogue.value_bounds("consistency.bertscore_f1") is None
    assert catalogue.value_bounds("latency.ms") is None and catalogue.value_bounds("no.such_metric") is None
    assert catalogue.value_bounds("consistency.umbrela.mean.median") == (0.0, 3.0)
