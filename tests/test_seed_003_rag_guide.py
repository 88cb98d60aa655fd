"""The RAG evaluation & optimisation guide's metrics, rebuilt from its own worked examples: its retrieval metrics
(below) and its RAGAS-style LLM-judged evaluator (``metrics: [rag_guide]``, further down).

Its ``RetrievalEvaluator`` (k = 3) cuts every ranking to the top k, then: Precision@k = relevant retrieved / k;
Recall@k = relevant retrieved / |relevant|, **1.0 when nothing is relevant**; MRR = 1 / rank of the first relevant
**within the top k**; NDCG with binary gains and the ideal from min(|relevant|, k) relevant documents; hit rate = at
least one relevant. Ours: ``golden.p@k``, ``golden.recall@k`` (``no_relevant: one``), ``golden.mrr@k``,
``golden.ndcg@k``, ``golden.hit@k`` -- and the documented differences of our defaults (``golden.mrr`` has no cut-off;
recall with nothing relevant is 0).
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.judge.sim_answer import reply as simulated_reply
from open_rag_eval.metrics.rag_guide import parse_binary, parse_claim_lines, parse_score, parse_yes_no
from open_rag_eval.scoring.golden import mean_measures, query_measures
from open_rag_eval.core.types import EvalResult, Labels, Passage, RAGOutput
from tests.trec_fakes import RuleJudge

# The guide's example, as printed: what the retriever returned, and the ground truth.
RETRIEVED = [
    ["doc_returns_1", "doc_shipping_1", "doc_returns_2"],
    ["doc_password_1", "doc_account_1", "doc_security_1"],
    ["doc_api_1", "doc_api_2", "doc_pricing_1"],
]
RELEVANT = [
    ["doc_returns_1", "doc_returns_2", "doc_returns_3"],
    ["doc_password_1", "doc_password_2"],
    ["doc_api_1", "doc_api_2"],
]


def evaluate(outputs: list[RAGOutput], **options: object) -> dict[tuple[str, str], float | None]:
    evaluator = GoldenEvaluator(GoldenOptions.model_validate({"metrics": ["golden"], **options}))
    result = asyncio.run(evaluator.evaluate(outputs, Context()))
    return {(s.query_id, s.metric): s.value for s in result.scores}


def outputs() -> list[RAGOutput]:
    return [RAGOutput(query_id=f"q{i}", query="?", passages=tuple(Passage(id=d, text=d) for d in retrieved),
                      labels=Labels(relevant_ids={d: 1 for d in relevant}))
            for i, (retrieved, relevant) in enumerate(zip(RETRIEVED, RELEVANT), start=1)]


def run_means(rows: dict[tuple[str, str], float | None]) -> dict[str, float]:
    names = {metric for _, metric in rows}
    return {name: sum(v for (_, m), v in rows.items() if m == name and v is not None) / 3 for name in names}


def test_the_guides_example_at_k_3() -> None:
    rows = evaluate(outputs(), k_values=[3], no_relevant="one")
    # per query, by hand: q1 finds 2 of 3, q2 1 of 2, q3 2 of 2, each with the first result relevant
    assert rows[("q1", "golden.p@3")] == pytest.approx(2 / 3)
    assert rows[("q2", "golden.recall@3")] == 0.5
    idcg_3 = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # 2.130930
    assert rows[("q1", "golden.ndcg@3")] == pytest.approx((1 + 1 / math.log2(4)) / idcg_3)  # 0.703918
    means = run_means(rows)
    assert means["golden.p@3"] == pytest.approx(0.555556, abs=1e-6)  # its example code would print "Precision@3: 0.556"
    assert means["golden.recall@3"] == pytest.approx(0.722222, abs=1e-6)  # Recall@3: 0.722
    assert means["golden.mrr@3"] == 1.0  # MRR: 1.000
    assert means["golden.ndcg@3"] == pytest.approx(0.772355, abs=1e-6)  # NDCG: 0.772
    assert means["golden.hit@3"] == 1.0  # Hit Rate: 1.000


def test_mrr_within_the_top_k_differs_from_our_mrr() -> None:
    ranking = ["x", "y", "z", "rel"]
    values = query_measures(ranking, {"rel": 1}, [3])
    assert values["mrr@3"] == 0.0  # the guide: nothing relevant in its cut ranking
    assert values["mrr"] == 0.25  # ours (trec_eval recip_rank): the whole ranking


def test_recall_with_nothing_relevant() -> None:
    ranking = ["a", "b"]
    assert query_measures(ranking, {}, [3], no_relevant="one")["recall@3"] == 1.0  # the guide: "perfect recall"
    assert query_measures(ranking, {}, [3])["recall@3"] == 0.0  # ours: trec_eval's 0
    assert query_measures(ranking, {}, [3], no_relevant="missing")["recall@3"] is None
    # and the query counts in the mean under the guide's rule, not under 'missing'
    per_query = [query_measures(["a"], {"a": 1}, [1], no_relevant=rule) for rule in ("one", "missing")]
    empty = [query_measures(["a"], {}, [1], no_relevant=rule) for rule in ("one", "missing")]
    assert mean_measures([per_query[0], empty[0]])["recall@1"] == 1.0
    assert mean_measures([per_query[1], empty[1]])["recall@1"] == 1.0  # left out, not averaged in as 0
    assert mean_measures([per_query[0], query_measures(["a"], {}, [1])])["recall@1"] == 0.5


def test_precision_pads_short_rankings_like_the_guide() -> None:
    # the guide divides by k whatever was retrieved: one relevant result at k = 3 is 1/3, as our padded P@k
    assert query_measures(["a"], {"a": 1}, [3])["p@3"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------------------------------------------------------
# Its RAGAS-style evaluator (RAGASEvaluator.evaluate_end_to_end), as ``metrics: [rag_guide]`` / ``profile: rag_guide``.
# Its own usage example, as printed:
QUERY = "What is the return policy?"
CONTEXTS = ["Returns are accepted within 30 days of purchase.", "Original receipt required for all returns.",
            "Refunds processed within 5-7 business days."]
ANSWER = "You can return items within 30 days [1] with the original receipt [2]. Refunds take 5-7 days [3]."
GROUND_TRUTH = "Items can be returned within 30 days with receipt. Refunds are processed in 5-7 business days."
CLAIMS = ["Items can be returned within 30 days.", "The original receipt is required.", "Refunds take 5-7 days."]
# its system messages, as printed
SYSTEM = {
    "rag_guide_context_relevance": "Rate how relevant this context is to the query (0-10). Return only the number.",
    "rag_guide_context_precision": "Is this context relevant to the query? Answer 1 for yes, 0 for no.",
    "rag_guide_claims": "Extract individual factual claims from this answer. List each claim on a new line.",
    "rag_guide_verify": "Is this claim supported by the context? Answer YES or NO.",
    "rag_guide_answer_relevance": "Rate how well this answer addresses the question (0-10). Return only the number.",
    "rag_guide_correctness": "Compare the answer to the ground truth.\nRate factual correctness 0-10 where:\n- 0: "
                             "Completely wrong\n- 5: Partially correct\n- 10: Fully correct\nReturn only the number.",
}


def guide_output(answer: str = ANSWER, contexts: list[str] | None = None) -> RAGOutput:
    contexts = CONTEXTS if contexts is None else contexts
    return RAGOutput(query_id="returns", query=QUERY, answer=answer,
                     passages=tuple(Passage(id=f"c{i}", text=t) for i, t in enumerate(contexts, start=1)),
                     labels=Labels(reference_answer=GROUND_TRUTH))


def scripted(**changes: object) -> RuleJudge:
    """The judge replies of the worked example (per context, per claim), with ``changes`` by task."""
    relevance = dict(zip(CONTEXTS, ("9", "8", "2")))
    precision = dict(zip(CONTEXTS, ("1", "0", "1")))
    verdicts = dict(zip(CLAIMS, ("YES", "Yes, it is.", "NO")))

    def rule(request: JudgeRequest) -> str:
        system, user = request.messages[0][1], request.messages[-1][1]
        assert system == SYSTEM[request.task]
        if request.task in changes:
            change = changes[request.task]
            return change(request) if callable(change) else str(change)
        context = user.partition("\n\nContext: ")[2]
        return {"rag_guide_context_relevance": lambda: relevance[context],
                "rag_guide_context_precision": lambda: precision[context],
                "rag_guide_claims": lambda: "\n".join(CLAIMS) + "\n",
                "rag_guide_verify": lambda: verdicts[user.partition("\n\nClaim: ")[2]],
                "rag_guide_answer_relevance": lambda: "9",
                "rag_guide_correctness": lambda: "8"}[request.task]()
    return RuleJudge(rule)


def guide_run(judge: RuleJudge, outputs: list[RAGOutput] | None = None) -> EvalResult:
    evaluator = GenerationEvaluator(GenerationOptions.model_validate({"profile": "rag_guide"}))
    return asyncio.run(evaluator.evaluate(outputs or [guide_output()], Context(judge=judge)))


def values(result: EvalResult) -> dict[str, float | str | None]:
    return {s.metric: s.value if s.error is None else s.error for s in result.scores}


def test_the_guides_ragas_example_with_scripted_replies() -> None:
    judge = scripted()
    result = guide_run(judge)
    got = values(result)
    # context relevance: (9 + 8 + 2) / 3 / 10 = 0.633333
    assert got["rag_guide.context_relevance"] == pytest.approx(0.633333, abs=1e-6)
    # context precision, relevance 1, 0, 1: precision@1 = 1, @2 = 1/2, @3 = 2/3;
    # (1 x 1 + 0.5 x 0 + 2/3 x 1) / (1 + 0 + 1) = 0.833333
    assert got["rag_guide.context_precision"] == pytest.approx(0.833333, abs=1e-6)
    # faithfulness: 3 claims, "YES", "Yes, it is." (YES in the upper-cased reply), "NO": 2 / 3
    assert got["rag_guide.faithfulness"] == pytest.approx(0.666667, abs=1e-6)
    assert got["rag_guide.answer_relevance"] == 0.9  # 9 / 10
    assert got["rag_guide.answer_correctness"] == 0.8  # 8 / 10
    # overall: (0.633333 + 0.666667 + 0.9) / 3 = 2.2 / 3 = 0.733333 (correctness is not part of it)
    assert got["rag_guide.overall"] == pytest.approx(0.733333, abs=1e-6)
    # what was sent: its prompts, one call per context (x2), one extraction, one verification per claim, two scores
    assert sorted(judge.tasks()) == sorted(["rag_guide_context_relevance"] * 3 + ["rag_guide_context_precision"] * 3
                                           + ["rag_guide_claims"] + ["rag_guide_verify"] * 3
                                           + ["rag_guide_answer_relevance", "rag_guide_correctness"])
    sent = {call.task: call for call in judge.calls}
    assert sent["rag_guide_claims"].messages[-1] == ("user", ANSWER)  # the answer as given, [1][2][3] included
    assert sent["rag_guide_claims"].params == {"temperature": 0.0, "max_tokens": 300}
    assert sent["rag_guide_verify"].params == {"temperature": 0.0, "max_tokens": 5}
    assert sent["rag_guide_verify"].messages[-1][1].startswith("Context: " + "\n".join(CONTEXTS) + "\n\nClaim: ")
    assert sent["rag_guide_correctness"].messages[-1][1] == (f"Question: {QUERY}\n\nAnswer: {ANSWER}\n\n"
                                                             f"Ground Truth: {GROUND_TRUTH}")
    assert sent["rag_guide_answer_relevance"].messages[-1][1] == f"Question: {QUERY}\n\nAnswer: {ANSWER}"
    (detail,) = [d for d in result.details if d.section == "rag_guide"]
    assert [c["supported"] for c in detail.data["faithfulness"]["claims"]] == [True, True, False]
    assert [row["value"] for row in detail.data["context_relevance"]] == [9.0, 8.0, 2.0]


def test_an_unreadable_reply_is_missing_with_its_reason_never_the_guides_fallback() -> None:
    # the guide would write 0.5 for "about seven" and 0 for "relevant"; here: asked once more, then missing
    judge = scripted(rag_guide_answer_relevance="about seven", rag_guide_context_precision="relevant",
                     rag_guide_correctness="11")
    got = values(guide_run(judge))
    assert got["rag_guide.answer_relevance"] == ("answer relevance failed: reply did not parse after 2 attempt(s): "
                                                 "not in the method's format ('about seven')")
    assert got["rag_guide.answer_correctness"] == ("correctness failed: reply did not parse after 2 attempt(s): not in "
                                                   "the method's format ('11')")
    assert str(got["rag_guide.context_precision"]).startswith("context precision of passage c1 failed: reply did "
                                                             "not parse")
    assert got["rag_guide.overall"] == "is missing: rag_guide.answer_relevance has no value"  # never a partial mean
    assert got["rag_guide.context_relevance"] == pytest.approx(0.633333, abs=1e-6)  # the others stand
    asked = [c.params["temperature"] for c in judge.calls if c.task == "rag_guide_answer_relevance"]
    assert asked == [0.0, 0.2]  # the re-ask, at the shared failure rules' temperature
    # a verification that says neither YES nor NO leaves faithfulness missing (the guide: not supported)
    got = values(guide_run(scripted(rag_guide_verify="I cannot tell.")))
    assert got["rag_guide.faithfulness"] == ("verification of claim 1 failed: reply did not parse after 2 attempt(s): "
                                             "not in the method's format ('I cannot tell.')")
    assert got["rag_guide.overall"] == "is missing: rag_guide.faithfulness has no value"


def test_no_claims_is_faithful_as_the_guide_defines_and_differs_from_ours() -> None:
    got = values(guide_run(scripted(rag_guide_claims="\n  \n")))  # a reply without a claim line
    assert got["rag_guide.faithfulness"] == 1.0
    # overall then: (0.633333 + 1.0 + 0.9) / 3 = 0.844444
    assert got["rag_guide.overall"] == pytest.approx(0.844444, abs=1e-6)
    judge = scripted()
    got = values(guide_run(judge, [guide_output(answer="")]))  # an empty answer has no claim: no extraction call
    assert got["rag_guide.faithfulness"] == 1.0 and "rag_guide_claims" not in judge.tasks()
    ours = GenerationEvaluator(GenerationOptions(metrics=["faithfulness"]))
    claims = RuleJudge(lambda r: json.dumps({"refusal": False, "claims": []}))
    mine = values(asyncio.run(ours.evaluate([guide_output()], Context(judge=claims))))
    assert mine["faithfulness.score"] == "is undefined: the answer makes no factual claim"  # ours: undefined


def test_without_contexts_or_reference() -> None:
    judge = scripted()
    output = guide_output(contexts=[]).model_copy(update={"labels": Labels()})
    got = values(guide_run(judge, [output]))
    assert got["rag_guide.context_relevance"] == "is undefined: no passages were retrieved"  # the guide writes 0
    assert got["rag_guide.context_precision"] == "is undefined: no passages were retrieved"
    assert got["rag_guide.faithfulness"] == 0.0  # 3 claims, none supported by nothing (no verification call)
    assert "rag_guide_verify" not in judge.tasks()
    assert got["rag_guide.answer_correctness"] == "is undefined without a reference_answer (none is given for this query)"
    assert got["rag_guide.overall"] == "is missing: rag_guide.context_relevance has no value"


@pytest.mark.parametrize(("parse", "text", "value"), [
    (parse_score, "7", 7.0), (parse_score, " 7.5\n", 7.5), (parse_score, "0", 0.0), (parse_score, "10", 10.0),
    (parse_score, "11", None), (parse_score, "-1", None), (parse_score, "nan", None), (parse_score, "7/10", None),
    (parse_score, "Score: 7", None),
    (parse_binary, "1", 1), (parse_binary, " 0 ", 0), (parse_binary, "2", None), (parse_binary, "yes", None),
    (parse_yes_no, "YES", True), (parse_yes_no, "yes.", True), (parse_yes_no, "NO", False), (parse_yes_no, "No.", False),
    (parse_yes_no, "Not sure", None), (parse_yes_no, "unknown", None),
    (parse_claim_lines, "a\n\n b \n", ("a", "b")), (parse_claim_lines, " \n", ()),
])
def test_parsers_read_as_the_guide_reads(parse: object, text: str, value: object) -> None:
    assert parse(text).value == value  # type: ignore[operator]


def test_the_simulated_judge_answers_the_guides_prompts_end_to_end(tmp_path: Path) -> None:
    row = {"query_id": "returns", "query": QUERY, "answer": ANSWER, "reference_answer": GROUND_TRUTH,
           "passages": [{"id": f"c{i}", "text": t} for i, t in enumerate(CONTEXTS, start=1)]}
    (tmp_path / "outputs.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    config = tmp_path / "guide.yaml"
    config.write_text("input: outputs.jsonl\noutput_dir: out\nprofile: rag_guide\njudge:\n  model: simulated-judge\n"
                      "  cache: false\n  simulated: {seed: 1}\nevaluators:\n  - type: generation\n", encoding="utf-8")
    assert main(["-q", "eval", "--config", str(config)]) == 0
    with (tmp_path / "out" / "results.csv").open(encoding="utf-8") as handle:
        (result,) = list(csv.DictReader(handle))
    # the simulated judge by word overlap: the query's content words are "retur" and "polic"; contexts 1 and 2
    # hold one of the two (5 / 10, relevant), context 3 none (0, not relevant): (0.5 + 0.5 + 0) / 3 = 0.333333;
    # precision (1 + 1) / 2 = 1.0; both claims (one per sentence) hold >= 60% of their words in the contexts: 1.0;
    # the answer holds "retur" of the question's two (5 / 10), and 9 of the ground truth's 11 content words
    # (9 / 11 x 10 = 8.2, rounded: 8 / 10)
    assert float(result["rag_guide.context_relevance"]) == pytest.approx(0.333333, abs=1e-6)
    assert float(result["rag_guide.context_precision"]) == 1.0
    assert float(result["rag_guide.faithfulness"]) == 1.0
    assert float(result["rag_guide.answer_relevance"]) == 0.5
    assert float(result["rag_guide.answer_correctness"]) == 0.8
    assert float(result["rag_guide.overall"]) == pytest.approx((1 / 3 + 1.0 + 0.5) / 3)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert {"rag_guide_claims", "rag_guide_verify"} <= set(manifest["accounting"]["tasks"])
    assert "rag_guide.verify" in manifest["prompt_hashes"]
    kinds = {simulated_reply([("system", SYSTEM[task]), ("user", "Query: q\n\nContext: c")]).kind
             for task in ("rag_guide_context_relevance", "rag_guide_context_precision")}
    assert kinds == {"rag_guide_context_relevance", "rag_guide_context_precision"}


def test_a_dry_run_plans_the_guides_calls(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    row = {"query_id": "returns", "query": QUERY, "answer": ANSWER, "reference_answer": GROUND_TRUTH,
           "passages": [{"id": f"c{i}", "text": t} for i, t in enumerate(CONTEXTS, start=1)]}
    (tmp_path / "outputs.jsonl").write_text(json.dumps(row) + "\n", encoding="utf-8")
    config = tmp_path / "guide.yaml"
    config.write_text("input: outputs.jsonl\noutput_dir: out\njudge:\n  model: simulated-judge\n"
                      "evaluators:\n  - type: generation\n    metrics: [rag_guide]\n", encoding="utf-8")
    assert main(["eval", "--config", str(config), "--dry-run"]) == 0
    printed = capfd.readouterr()
    text = printed.out + printed.err
    assert "rag_guide_context_relevance" in text and "rag_guide_verify" in text
    assert not (tmp_path / "out").exists()


def test_a_query_with_nothing_relevant_has_recall_1_and_hit_0_as_the_guides_code() -> None:
    """The guide's RetrievalEvaluator: ``recall = ... if query_relevant else 1.0`` but ``hits.append(1 if
    relevant_retrieved > 0 else 0)``: with no relevant document recall is 1 and hit 0. Its three queries and a fourth
    with nothing relevant, k = 3: Recall@3 (2/3 + 1/2 + 1 + 1) / 4 = 0.791667, Hit Rate 3/4 = 0.75."""
    fourth = RAGOutput(query_id="q4", query="?", labels=Labels(relevant_ids={}),
                       passages=tuple(Passage(id=d, text=d) for d in ("doc_pricing_1", "doc_shipping_1")))
    rows = evaluate([*outputs(), fourth], k_values=[3], no_relevant="one", no_relevant_hit="trec")
    assert (rows[("q4", "golden.recall@3")], rows[("q4", "golden.hit@3")]) == (1.0, 0.0)
    means = {name: sum(rows[(f"q{i}", name)] or 0.0 for i in range(1, 5)) / 4
             for name in ("golden.recall@3", "golden.hit@3")}
    assert means["golden.recall@3"] == pytest.approx(0.791667, abs=1e-6)
    assert means["golden.hit@3"] == 0.75
    # one option for both, as before: hit 1 too (what the guide's code does not do)
    assert evaluate([fourth], k_values=[3], no_relevant="one")[("q4", "golden.hit@3")] == 1.0


def test_a_blank_claims_reply_is_no_claim_and_a_failed_call_is_missing(tmp_path: Path) -> None:
    """Through the real judge client: the guide defines "no claims -> faithfulness 1.0"; a judge that answers the
    claims prompt with blank content listed no claim (1.0), while a claims call that fails (HTTP 500 every time)
    leaves faithfulness missing with its reason."""
    from tests.openai_server import Reply, ScriptedServer, config, with_judge

    def responder(blank: bool) -> Callable[[dict[str, Any]], Reply]:
        rule = scripted()

        def reply(body: dict[str, Any]) -> Reply:
            messages = tuple((m["role"], m["content"]) for m in body["messages"])
            task = next(t for t, text in SYSTEM.items() if messages[0][1] == text)
            if task == "rag_guide_claims":
                return Reply.ok("") if blank else Reply.error(500, "boom")
            return Reply.ok(rule.rule(JudgeRequest(task, messages)))
        return reply

    evaluator = GenerationEvaluator(GenerationOptions.model_validate({"profile": "rag_guide"}))
    for blank, expected in ((True, 1.0), (False, None)):
        with ScriptedServer(responder=responder(blank)) as server:
            result = with_judge(config(server.base_url, max_retries=1), lambda judge: evaluator.evaluate(
                [guide_output()], Context(judge=judge)), base_dir=tmp_path)
        got = {s.metric: s for s in result.scores}["rag_guide.faithfulness"]
        assert got.value == expected, got.error
        if not blank:
            assert got.error.startswith("claim extraction failed: judge call failed") and "500" in got.error
