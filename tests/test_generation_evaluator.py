"""The generation evaluator with a rule judge: calls, sharing, priorities, edge cases and failures."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.judge.base import JudgeRequest, Priority
from open_rag_eval.metrics.claims import parse_claims, parse_verdicts
from open_rag_eval.metrics.context import parse_rating, parse_useful
from open_rag_eval.core.types import EvalResult, RAGOutput
from tests.generation_fakes import Verdicts, judge, output
from tests.trec_fakes import RuleJudge


def _run(outputs: list[RAGOutput], rule_judge: RuleJudge, **options: object) -> EvalResult:
    evaluator = GenerationEvaluator(GenerationOptions(**options))  # type: ignore[arg-type]
    return asyncio.run(evaluator.evaluate(outputs, Context(judge=rule_judge)))


def _scores(result: EvalResult, query_id: str = "q1", run: int = 1) -> dict[str, float | str | None]:
    return {s.metric: s.value if s.error is None else s.error for s in result.scores
            if s.query_id == query_id and s.run == run}


def _detail(result: EvalResult, section: str, run: int = 1) -> dict[str, object]:
    return next(d.data for d in result.details if d.section == section and d.run == run)


def test_one_output_calls_and_values() -> None:
    rule = judge()
    result = _run([output()], rule)
    tasks = rule.tasks()
    # answer + reference extraction; verification: answer vs context, reference vs context, answer vs reference,
    # reference vs answer; usefulness: 2 passages x (answer, reference); relevance: 2 prompts
    assert {t: tasks.count(t) for t in set(tasks)} == {"claim_extract": 2, "claim_verify": 4, "context_useful": 4,
                                                       "context_relevance": 2}
    values = _scores(result)
    assert values["faithfulness.score"] == 1.0 and values["faithfulness.n_claims"] == 2
    assert values["faithfulness.cited"] == 1.0
    assert values["context.precision_answer"] == 1.0 and values["context.precision_reference"] == 1.0
    assert values["context.recall"] == 1.0 and values["context.relevance"] == 1.0
    # the reference says only "Alpha is one.": Beta is a false positive, nothing is missed
    assert (values["correctness.tp"], values["correctness.fp"], values["correctness.fn"]) == (1, 1, 0)
    assert values["correctness.f1"] == pytest.approx(1 / (1 + 0.5)) and values["correctness.precision"] == 0.5
    assert values["correctness.recall"] == 1.0


def test_faithfulness_details_list_every_claim_with_sentence_citations_verdict_and_support() -> None:
    result = _run([output(answer="Alpha is one [1]. Beta is two [1]. Gamma is three.")], judge(),
                  metrics=["faithfulness"])
    values = _scores(result)
    assert values["faithfulness.score"] == pytest.approx(2 / 3)  # alpha, beta supported; gamma not
    assert values["faithfulness.cited"] == pytest.approx(1 / 3)  # beta cites p1 but only p2 supports it
    assert values["faithfulness.n_uncited"] == 1
    claims = _detail(result, "faithfulness")["claims"]
    assert claims == [
        {"claim": "Alpha is one.", "sentence": 1, "citations": ["p1"], "supported": True, "supporting": ["p1"],
         "cited_supported": True},
        {"claim": "Beta is two.", "sentence": 2, "citations": ["p1"], "supported": True, "supporting": ["p2"],
         "cited_supported": False},
        {"claim": "Gamma is three.", "sentence": 3, "citations": [], "supported": False, "supporting": [],
         "cited_supported": False}]


def test_prompts_carry_numbered_sentences_sources_and_claims() -> None:
    rule = judge()
    _run([output()], rule, metrics=["faithfulness"])
    extract = next(c for c in rule.calls if c.task == "claim_extract").prompt
    assert "Question: what are alpha and beta\n" in extract and "[1] Alpha is one.\n[2] Beta is two.\n" in extract
    verify = next(c for c in rule.calls if c.task == "claim_verify").prompt
    assert "Sources:\n[1] alpha passage\n[2] beta passage\n" in verify
    assert "Claims:\n(1) Alpha is one.\n(2) Beta is two.\n" in verify


def test_extraction_goes_first_and_feeds_verification() -> None:
    rule = judge()
    _run([output()], rule)
    priority = {c.task: c.priority for c in rule.calls}
    assert priority == {"claim_extract": Priority.CHAIN_START, "claim_verify": Priority.CHAIN,
                        "context_useful": Priority.LEAF, "context_relevance": Priority.LEAF}
    tasks = rule.tasks()
    assert tasks.index("claim_verify") > max(i for i, t in enumerate(tasks) if t == "claim_extract") - 1


def test_runs_share_extraction_reference_judgments_and_relevance() -> None:
    rule = judge()
    result = _run([output(run=1), output(run=2), output(run=3, answer="Alpha is one, it says [1].")], rule)
    tasks = rule.tasks()
    # answers: 2 distinct texts; the reference once for the query
    assert tasks.count("claim_extract") == 3
    assert tasks.count("context_relevance") == 2  # same passages in every run
    assert tasks.count("context_useful") == 2 + 2 + 2  # reference x2 once; two distinct answers x2
    # an answer equal to the reference shares its usefulness judgments too
    rule = judge()
    _run([output(run=1, answer="Alpha is one [1].")], rule, metrics=["context_precision"])
    assert rule.tasks().count("context_useful") == 2
    assert _scores(result, run=3)["faithfulness.n_claims"] == 1


def test_a_refusal_is_reported_as_such_not_as_unfaithful() -> None:
    rule = judge()
    result = _run([output(answer="I don't know.")], rule)
    values = _scores(result)
    for name in ("faithfulness.score", "faithfulness.cited", "context.precision_answer"):
        assert "is undefined for a refusal" in str(values[name])
    assert values["faithfulness.n_claims"] == 0
    assert values["correctness.f1"] == 0.0 and values["correctness.recall"] == 0.0  # the reference's claim missed
    assert "answer makes no factual claim" in str(values["correctness.precision"])
    assert values["context.recall"] == 1.0  # retrieval is judged apart from the answer
    assert _detail(result, "faithfulness")["refusal"] is True
    assert "claim_verify" in rule.tasks()  # only for the reference side


def test_no_passages_make_every_claim_unsupported_without_a_call() -> None:
    rule = judge()
    result = _run([output(passages=())], rule, metrics=["faithfulness", "context_precision", "context_relevance",
                                                         "context_recall"])
    values = _scores(result)
    assert values["faithfulness.score"] == 0.0 and values["faithfulness.cited"] == 0.0
    assert values["context.recall"] == 0.0
    for name in ("context.precision_answer", "context.precision_reference", "context.relevance"):
        assert values[name] == "is undefined: no passages were retrieved"
    assert set(rule.tasks()) == {"claim_extract"}


def test_missing_reference_is_missing_with_a_reason_not_zero() -> None:
    result = _run([output(reference=None)], judge())
    values = _scores(result)
    for name in ("context.precision_reference", "context.recall", "correctness.f1", "correctness.precision",
                 "correctness.recall"):
        assert values[name] == "is undefined without a reference_answer (none is given for this query)"
    assert values["faithfulness.score"] == 1.0


def test_neither_side_with_a_claim_leaves_correctness_undefined() -> None:
    result = _run([output(answer="I don't know.", reference="I don't know.")], judge(), metrics=["answer_correctness"])
    values = _scores(result)
    assert "neither the answer nor the reference" in str(values["correctness.f1"])
    assert values["correctness.tp"] == 0 and values["correctness.fn"] == 0


def test_a_failed_extraction_is_missing_everywhere_it_feeds_and_counted() -> None:
    verdicts = Verdicts(overrides={"claim_extract": lambda r: JudgeCallError("HTTP 500 (simulated)")})
    result = _run([output()], judge(verdicts), metrics=["faithfulness", "answer_correctness"])
    values = _scores(result)
    for name in ("faithfulness.score", "faithfulness.cited", "faithfulness.n_claims", "correctness.f1"):
        assert str(values[name]).startswith("claim extraction failed: judge call failed: HTTP 500"), name


def test_an_unparseable_reply_is_asked_once_more_then_missing() -> None:
    replies = iter(["not json", '{"verdicts": "x"}'])
    verdicts = Verdicts(overrides={"claim_verify": lambda r: next(replies)})
    rule = judge(verdicts)
    result = _run([output()], rule, metrics=["faithfulness"])
    calls = [c for c in rule.calls if c.task == "claim_verify"]
    assert [c.params["temperature"] for c in calls] == [0.0, 0.2] and calls[1].sample != calls[0].sample
    values = _scores(result)
    assert str(values["faithfulness.score"]).startswith("claim verification failed: reply did not parse")
    assert values["faithfulness.n_claims"] == 2  # the claims are known


def test_a_reask_that_parses_is_used() -> None:
    replies = iter(["{}", '{"verdicts": [{"claim": 1, "supported": true, "sources": [1]}, '
                          '{"claim": 2, "supported": false, "sources": []}]}'])
    rule = judge(Verdicts(overrides={"claim_verify": lambda r: next(replies)}))
    result = _run([output()], rule, metrics=["faithfulness"])
    assert _scores(result)["faithfulness.score"] == 0.5


def test_one_failed_usefulness_leaves_precision_undefined_the_other_variant_stands() -> None:
    def useful(request: JudgeRequest) -> str | Exception:
        user = request.prompt
        if "Passage: beta passage" in user and "Beta is two" in user:
            return JudgeCallError("HTTP 400 (simulated)")
        return '{"useful": 1}'

    result = _run([output()], judge(Verdicts(overrides={"context_useful": useful})), metrics=["context_precision"])
    values = _scores(result)
    assert str(values["context.precision_answer"]).startswith("usefulness of passage p2 failed: judge call failed")
    assert values["context.precision_reference"] == 1.0


def test_context_precision_ranks_useful_passages() -> None:
    result = _run([output(passages=("noise", "alpha passage", "noise 2", "beta passage"))],
                  judge(Verdicts(useful=lambda passage, answer: int("noise" not in passage))),
                  metrics=["context_precision"], context_precision={"against": ["answer"]})
    values = _scores(result)
    assert values == {"context.precision_answer": pytest.approx((1 / 2 + 2 / 4) / 2)}


def test_context_relevance_averages_two_judges_and_survives_one_failure() -> None:
    assert _scores(_run([output()], judge(Verdicts(ratings=(2, 1))), metrics=["context_relevance"])) == \
        {"context.relevance": 0.75}
    def first_garbled(request: JudgeRequest) -> str:
        return "nonsense" if "You rate how relevant" in request.prompt else '{"rating": 1}'

    rule = judge(Verdicts(overrides={"context_relevance": first_garbled}))
    result = _run([output()], rule, metrics=["context_relevance"])
    assert _scores(result) == {"context.relevance": 0.5}
    assert len(rule.calls) == 3  # the garbled one asked twice
    judges = _detail(result, "context_relevance")["judges"]
    assert [j["rating"] for j in judges] == [None, 1] and judges[0]["status"] == "unparsed"


def test_a_failed_output_fails_every_metric_with_its_reason() -> None:
    rule = judge()
    result = _run([output(error="connector timed out")], rule, metrics=["faithfulness", "context_relevance"])
    assert set(_scores(result).values()) == {"no output: connector timed out"}
    assert rule.calls == []


def test_metric_selection_and_names() -> None:
    assert GenerationEvaluator.metric_names(GenerationOptions(metrics=["faithfulness"])) == [
        "faithfulness.score", "faithfulness.cited", "faithfulness.n_claims", "faithfulness.n_uncited"]
    with pytest.raises(ValidationError, match="unknown metric.*valid choices: faithfulness"):
        GenerationOptions(metrics=["faithfulnes"])
    with pytest.raises(ValidationError, match="blend needs the 'answer_similarity' metric in metrics"):
        GenerationOptions(answer_correctness={"blend": True})
    with pytest.raises(ValidationError, match="non-negative"):
        GenerationOptions(answer_correctness={"weights": [-1, 2]})


def test_dry_run_plan_counts_the_requests_a_run_sends() -> None:
    outputs = [output(run=1), output(run=2)]
    plan = GenerationEvaluator().plan(outputs)
    tasks = plan.by_task()
    rule = judge()
    _run(outputs, rule)
    sent = rule.tasks()
    assert {t: p.calls for t, p in tasks.items()} == {t: sent.count(t) for t in set(sent)}
    assert tasks["claim_verify"].reask_calls == tasks["claim_verify"].calls  # one re-ask at most per request


@pytest.mark.parametrize(("text", "value"), [
    ('{"refusal": false, "claims": [{"sentence": 1, "claim": " A  b. "}]}', (False, ((1, "A b."),))),
    ('```json\n{"refusal": true, "claims": []}\n```', (True, ())),
    ('{"refusal": "no", "claims": []}', None),
    ('{"refusal": false, "claims": [{"sentence": 3, "claim": "x"}]}', None),  # no sentence 3
    ('{"refusal": false, "claims": [{"sentence": true, "claim": "x"}]}', None),
    ('{"refusal": false, "claims": [{"sentence": 1, "claim": ""}]}', None),
    ('[1, 2]', None),
])
def test_parse_claims(text: str, value: object) -> None:
    assert parse_claims(text, 2).value == value


def test_parse_verdicts() -> None:
    ok = json.dumps({"verdicts": [{"claim": 1, "supported": True, "sources": [2, 9, 2]},
                                  {"claim": 2, "supported": False, "sources": [1]}]})
    parsed = parse_verdicts(ok, 2, 3).value
    assert parsed is not None and [(v.supported, v.sources) for v in parsed] == [(True, (2,)), (False, ())]
    assert parse_verdicts(ok, 3, 3).value is None  # one verdict missing
    swapped = json.dumps({"verdicts": [{"claim": 2, "supported": True}, {"claim": 1, "supported": True}]})
    assert parse_verdicts(swapped, 2, 3).value is None
    assert parse_verdicts('{"verdicts": [{"claim": 1, "supported": 1}]}', 1, 1).value is None


def test_parse_useful_and_rating() -> None:
    assert parse_useful('{"useful": 1}').value is True and parse_useful('{"useful": false}').value is False
    assert parse_useful('{"useful": 2}').value is None and parse_useful("yes").value is None
    assert parse_rating('{"rating": 2}').value == 2 and parse_rating('{"rating": 3}').value is None


class _FixedSimilarity:
    """A stand-in semantic-similarity metric (the blend hook's other half)."""

    def __init__(self, options: object = None) -> None:
        pass

    def names(self) -> list[str]:
        return ["similarity.fixed"]

    async def score(self, session: object, output: RAGOutput) -> tuple[list, list]:
        from open_rag_eval.core.types import Score

        return [Score.ok(output, "similarity.fixed", 0.8)], []


def test_blend_hook_weights_the_f1_with_a_similarity_metric(monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval.evaluators import generation_options

    monkeypatch.setitem(generation_options.METRICS, "fixed_similarity", (f"{__name__}:_FixedSimilarity", None))
    monkeypatch.setattr(generation_options, "SIMILARITY", ("fixed_similarity", "similarity.fixed"))
    with pytest.raises(ValidationError, match="needs the 'fixed_similarity' metric"):
        GenerationOptions(metrics=["answer_correctness"], answer_correctness={"blend": True})
    options = {"metrics": ["answer_correctness", "fixed_similarity"], "answer_correctness": {"blend": True}}
    assert "correctness.score" in GenerationEvaluator.metric_names(GenerationOptions(**options))
    values = _scores(_run([output()], judge(), **options))
    # f1 = 1 / (1 + 0.5) (tp 1, fp 1); 0.75 * 0.6667 + 0.25 * 0.8
    assert values["correctness.score"] == pytest.approx(0.75 * (2 / 3) + 0.25 * 0.8)
    values = _scores(_run([output(reference=None)], judge(), **options))
    assert values["correctness.score"] == "is undefined without a reference_answer (none is given for this query)"


def test_context_recall_edge_cases() -> None:
    values = _scores(_run([output(reference="I don't know.")], judge(), metrics=["context_recall"]))
    assert values == {"context.recall": "is undefined: the reference answer makes no factual claim",
                      "context.n_reference_claims": 0}
    failing = Verdicts(overrides={"claim_extract": lambda r: "garbled"})
    values = _scores(_run([output()], judge(failing), metrics=["context_recall"]))
    assert str(values["context.recall"]).startswith("claim extraction failed: reply did not parse after 2")
    # recall over the reference's claims: alpha is in the passages, delta is not
    values = _scores(_run([output(reference="Alpha holds. Delta holds.")], judge(), metrics=["context_recall"]))
    assert values == {"context.recall": 0.5, "context.n_reference_claims": 2}


def test_rehearsal_claims_are_the_sentences_and_a_bare_no_answer_is_a_refusal() -> None:
    from open_rag_eval.judge.rehearsal import expected_reply
    from open_rag_eval.prompts import load

    prompt = load("generation.claim_extract").render(question="Q?", sentences="[1] Alpha holds.\n[2] Beta holds.")
    assert json.loads(expected_reply(JudgeRequest.chat("claim_extract", prompt))) == {"refusal": False, "claims": [
        {"sentence": 1, "claim": "Alpha holds."}, {"sentence": 2, "claim": "Beta holds."}]}
    refusal = load("generation.claim_extract").render(question="Q?", sentences="[1] NO_ANSWER")
    assert json.loads(expected_reply(JudgeRequest.chat("claim_extract", refusal))) == {"refusal": True, "claims": []}
    verify = load("generation.claim_verify").render(sources="[1] a", claims="(1) x\n(2) y")
    assert parse_verdicts(expected_reply(JudgeRequest.chat("claim_verify", verify)), 2, 1).value is not None
    for task, parse in (("context_useful", parse_useful), ("context_relevance", parse_rating)):
        assert parse(expected_reply(JudgeRequest.chat(task, "anything"))).value is not None


def test_drill_down_lists_claims_escaped_and_says_refusal_and_failure() -> None:
    from open_rag_eval.report.drilldown import render_query
    from open_rag_eval.core.missing import UNDEFINED, kind

    claims = [{"claim": "<script>alert(1)</script> holds.", "sentence": 1, "citations": ["p1"], "supported": True,
               "supporting": ["p1"], "cited_supported": True},
              {"claim": "Beta holds.", "sentence": 2, "citations": [], "supported": False, "supporting": [],
               "cited_supported": False}]
    output = {"run": 1, "answer_text": "x", "scores": {}, "errors": {},
              "details": {"faithfulness": {"claims": claims, "refusal": False}}}
    html = render_query(0, "q1", "query", [output], None, {})
    assert "Claims (faithfulness)" in html and "&lt;script&gt;alert(1)&lt;/script&gt; holds." in html
    assert "<script>alert" not in html
    assert 'data-supported="True"' in html and 'data-supported="False"' in html
    refused = {**output, "details": {"faithfulness": {"claims": [], "refusal": True}}}
    assert "the answer is a refusal: no claim to check" in render_query(0, "q1", "q", [refused], None, {})
    failed = {**output, "details": {"faithfulness": {"claims": claims, "verification_reason": "claim verification "
                                                                                               "failed: HTTP 500"}}}
    assert "claim verification failed: HTTP 500" in render_query(0, "q1", "q", [failed], None, {})
    # the reasons the generation metrics give are counted as undefined, not as failures
    from open_rag_eval.metrics._generation import EMPTY_ANSWER, NO_CLAIMS, NO_PASSAGES, NO_REFERENCE, REFUSAL

    assert {kind(reason) for reason in (NO_REFERENCE, REFUSAL, NO_CLAIMS, EMPTY_ANSWER, NO_PASSAGES)} == {UNDEFINED}
    assert kind("claim extraction failed: judge call failed: HTTP 500") == "failed"


def test_usefulness_is_judged_per_passage_as_sent_title_included() -> None:
    from open_rag_eval.core.types import Passage

    same = (Passage(id="p1", text="same words", title="Other"), Passage(id="p2", text="same words", title="Alpha"))
    rule = judge(Verdicts(useful=lambda passage, answer: int(passage.startswith("Alpha:"))))
    result = _run([output().model_copy(update={"passages": same})], rule, metrics=["context_precision"],
                  context_precision={"against": ["answer"]})
    # two prompts (the titles differ), useful only at rank 2: AP = (1/2) / 1 = 0.5 -- not one judgment for both
    assert rule.tasks().count("context_useful") == 2
    assert _scores(result)["context.precision_answer"] == 0.5
