"""A trailing Sources section, under every profile: the golden checks count its entries as the answer's citations
(citation compliance); TREC support, judged per statement, never spreads them over the statements but records them
and says when they are the answer's only citations, and the report shows why such an answer's support is 0."""

from __future__ import annotations

import asyncio

import pytest

from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
from open_rag_eval.metrics.citation import answer_sources
from open_rag_eval.report.drilldown import render_query
from open_rag_eval.core.types import EvalResult, Labels, Passage, RAGOutput
from tests.trec_fakes import RuleJudge

PASSAGES = (Passage(id="moon.txt", text="The Moon orbits the Earth every 27 days."),
            Passage(id="tides.txt", text="The Moon's gravity raises tides."))
ONLY_SOURCES = "The Moon orbits every 27 days. Its gravity raises tides.\n\n**Sources:**\n- moon.txt\n- tides.txt"
INLINE = "The Moon orbits every 27 days [1]. Its gravity raises tides [2].\n\nSources:\n[1] moon.txt\n[2] tides.txt"


def _output(answer: str, qid: str = "q1") -> RAGOutput:
    return RAGOutput(query_id=qid, query="What does the Moon do?", passages=PASSAGES, answer=answer,
                     labels=Labels(required_citations=2))


def _trec(outputs: list[RAGOutput], **options: object) -> EvalResult:
    evaluator = TrecEvaluator(TrecOptions(metrics=["citation"], **options))  # type: ignore[arg-type]
    return asyncio.run(evaluator.evaluate(outputs, Context(judge=RuleJudge())))


def _by_query(result: EvalResult) -> dict[str, tuple[dict[str, float | None], dict[str, object]]]:
    scores = {q: {s.metric: s.value for s in result.scores if s.query_id == q} for q in ("only", "inline", "none")}
    details = {d.query_id: d.data for d in result.details if d.section == "citation"}
    return {q: (scores[q], details.get(q, {})) for q in scores}


def test_answer_sources_reads_the_trailing_section() -> None:
    assert answer_sources(ONLY_SOURCES) == ["moon.txt", "tides.txt"]
    assert answer_sources(INLINE) == ["[1] moon.txt", "[2] tides.txt"]
    assert answer_sources("Paris.\n\nReferences: a.pdf; b.pdf") == ["a.pdf", "b.pdf"]
    assert answer_sources("No section here [1].") == [] and answer_sources(None) == []


@pytest.mark.parametrize("profile", ["trec2024", "vectara"])
def test_support_is_judged_per_statement_and_a_sources_only_answer_says_why_it_scores_0(profile: str) -> None:
    options = {"citation": {"scoring": "per_passage"}} if profile == "vectara" else {}
    rows = _by_query(_trec([_output(ONLY_SOURCES, "only"), _output(INLINE, "inline"),
                            _output("The Moon orbits every 27 days [1].", "none")], **options))
    only, detail = rows["only"]
    # both statements uncited: nothing judged, no support (METHODS: an uncited statement is No Support)
    assert (only["citation.precision"], only["citation.recall"], only["citation.n_cited"]) == (0.0, 0.0, 0)
    assert [s["citations"] for s in detail["statements"]] == [[], []]  # the section is not spread over them
    assert (detail["sources_entries"], detail["sources_only"]) == (["moon.txt", "tides.txt"], True)
    inline, detail = rows["inline"]
    assert (inline["citation.recall"], inline["citation.n_cited"]) == (1.0, 2)  # every statement Full Support
    assert (detail["sources_entries"], detail["sources_only"]) == (["[1] moon.txt", "[2] tides.txt"], False)
    assert "sources_entries" not in rows["none"][1] and "sources_only" not in rows["none"][1]


def test_golden_citation_compliance_counts_the_sources_entries() -> None:
    evaluator = GoldenEvaluator(GoldenOptions(metrics=["lexical.citation_compliance", "lexical.has_sources"]))
    result = asyncio.run(evaluator.evaluate([_output(ONLY_SOURCES, "only"), _output("The Moon orbits [1].", "one")],
                                            Context(judge=None)))
    values = {(s.query_id, s.metric): s.value for s in result.scores}
    # a sources section (0.5) + two entries for two required citations (0.5)
    assert (values[("only", "lexical.has_sources")], values[("only", "lexical.citation_compliance")]) == (1.0, 1.0)
    # no section (0) + one cited passage of two required (0)
    assert (values[("one", "lexical.has_sources")], values[("one", "lexical.citation_compliance")]) == (0.0, 0.0)


def test_the_report_says_when_an_answer_cites_only_in_its_sources_section() -> None:
    result = _trec([_output(ONLY_SOURCES, "only"), _output(INLINE, "inline")])
    for qid, shown in (("only", True), ("inline", False)):
        detail = next(d.data for d in result.details if d.query_id == qid and d.section == "citation")
        page = render_query(1, qid, "What does the Moon do?", [{"run": 1, "details": {"citation": detail},
                                                                "answer_text": ONLY_SOURCES}], None, {})
        note = "This answer cites only in its Sources section (moon.txt; tides.txt)"
        assert (note in page) is shown
