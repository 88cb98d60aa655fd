import asyncio

from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.metrics.citation import CitationJudge, CitationOptions, citation_result
from open_rag_eval.core.types import AnswerPart, Passage
from tests.fakes import ScriptedJudge, task_is
from tests.trec_fakes import make_output

PASSAGES = (Passage(id="d1", text="one", title="T1"), Passage(id="d2", text="two"))


def _run(answer: tuple[AnswerPart, ...], judge: ScriptedJudge, variant: str = "first_citation") -> dict[str, float | None]:
    output = make_output(passages=PASSAGES, answer=answer)
    options = CitationOptions(variant=variant)  # type: ignore[arg-type]
    judgments = asyncio.run(CitationJudge(options).judge_output(judge, output))
    scores, _ = citation_result(output, judgments, options)
    return {s.metric.removeprefix("citation."): s.value for s in scores}


S2 = (AnswerPart(text="s1", citations=("d1", "d2")), AnswerPart(text="s2", citations=("d1",)), AnswerPart(text="s3"))


def _s2_judge() -> ScriptedJudge:
    return ScriptedJudge().add(task_is("support", "Statement: s1\n\nCitation: T1: one"), "Full Support").add(
        task_is("support", "Statement: s1\n\nCitation: two"), "No Support").add(
        task_is("support", "Statement: s2"), "Partial Support")


def test_s2_first_citation_one_call_per_cited_statement() -> None:
    judge = _s2_judge()
    values = _run(S2, judge)
    assert (values["precision"], values["recall"]) == (0.75, 0.5) and round(values["f1"] or 0, 6) == 0.6
    assert len(judge.calls) == 2 and judge.calls[0].messages[0][0] == "user" and len(judge.calls[0].messages) == 1
    assert judge.calls[0].params == {"temperature": 0.1}


def test_s2_all_citations_variant() -> None:
    judge = _s2_judge()
    values = _run(S2, judge, "all_citations")
    assert values["precision"] == 0.5 and round(values["recall"] or 0, 6) == 0.333333 and len(judge.calls) == 3


def test_fabricated_citation_is_no_support_without_a_call_and_never_helps() -> None:
    judge = ScriptedJudge().add(task_is("support"), "Full Support")
    honest = _run((AnswerPart(text="a", citations=("d1",)), AnswerPart(text="b")), judge)
    judge = ScriptedJudge().add(task_is("support"), "Full Support")
    faked = _run((AnswerPart(text="a", citations=("d1",)), AnswerPart(text="b", citations=("zz",))), judge)
    assert len(judge.calls) == 1 and faked["fabricated"] == 1
    assert (faked["precision"] or 0) <= (honest["precision"] or 0) and (faked["recall"] or 0) <= (honest["recall"] or 0)
    assert faked["precision"] == 0.5


def test_unparsed_is_excluded_and_counted_and_failure_is_separate() -> None:
    judge = ScriptedJudge().add(task_is("support", "Statement: a"), "Unsupported").add(
        task_is("support", "Statement: b"), "Full Support").add(task_is("support", "Statement: c"),
                                                               JudgeCallError("HTTP 500"))
    answer = tuple(AnswerPart(text=t, citations=("d2",)) for t in "abc")
    values = _run(answer, judge)
    assert (values["precision"], values["recall"], values["n_unparsed"], values["n_failed"]) == (1.0, 1.0, 1, 1)


def test_every_judgment_failed_is_missing_not_zero() -> None:
    judge = ScriptedJudge().add(task_is("support"), JudgeCallError("HTTP 500"), JudgeCallError("HTTP 500"))
    answer = (AnswerPart(text="a", citations=("d1",)), AnswerPart(text="b", citations=("d2",)))
    output = make_output(passages=PASSAGES, answer=answer)
    judgments = asyncio.run(CitationJudge().judge_output(judge, output))
    scores, detail = citation_result(output, judgments, CitationOptions())
    precision = next(s for s in scores if s.metric == "citation.precision")
    assert precision.value is None and "HTTP 500" in (precision.error or "")
    assert detail.data["statements"][0]["judgments"][0]["status"] == "failed"


def test_no_citations_at_all_is_zero_by_convention() -> None:
    values = _run((AnswerPart(text="a"), AnswerPart(text="b")), ScriptedJudge())
    assert (values["precision"], values["recall"], values["f1"]) == (0.0, 0.0, 0.0)
