"""``profile: vectara`` against vectara's open-rag-eval 0.3.0 where its behaviour is defined: statements between
citation markers, ROUGE-L both ways, its prompt bytes, AP@k omitted beyond the list, no reply limit, its config's
run_consistency semantics and chaining. The whole-run comparison with a recording of the real package is
tests/test_reference_vectara.py."""

from __future__ import annotations

import asyncio

import pytest

from open_rag_eval.config import load_config_text
from open_rag_eval.config.peer import translate_peer_config
from open_rag_eval.core.segment import between_markers
from open_rag_eval.core.types import Passage, RAGOutput
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
from open_rag_eval.metrics.umbrela import UmbrelaGrader, UmbrelaOptions
from open_rag_eval.prompts import load
from open_rag_eval.scoring.trec import umbrela_scores
from tests.trec_fakes import RuleJudge

PASSAGES = [Passage(id=str(i), text=f"passage {i} about x") for i in (1, 2, 3)]


def test_a_statement_is_the_text_between_two_citation_groups() -> None:
    parts = between_markers("X is A [1]. It is B [2, 3]. Also C [1], [2]. Unsupported tail", ["1", "2", "3"])
    assert [(p.text, p.citations) for p in parts] == [
        ("X is A", ("1",)), (". It is B", ("2", "3")), (". Also C", ("1", "2")), (". Unsupported tail", ())]
    # the "." after the last group is one character: no statement; an answer without markers is one statement
    assert [p.text for p in between_markers("A [1]. B [2].", ["1", "2"])] == ["A", ". B"]
    assert [(p.text, p.citations) for p in between_markers("no markers ", ["1"])] == [("no markers ", ())]


def test_the_profile_scores_vectaras_statements_and_its_joined_text() -> None:
    output = RAGOutput(query_id="q", query="what is x", passages=tuple(PASSAGES),
                       answer="X is A. X is B [1]. X is C [2].")
    assert [p.text for p in output.answer] == ["X is A. X is B.", "X is C."]  # our sentences
    judge = RuleJudge()
    evaluator = TrecEvaluator(TrecOptions(profile="vectara", metrics=["citation", "no_answer", "nuggets"]))
    asyncio.run(evaluator.evaluate([output], Context(judge=judge)))
    support = [c.messages[-1][1] for c in judge.calls if c.task == "support"]
    assert len(support) == 2 and "Statement: X is A. X is B\n" in support[0] and "Statement: . X is C\n" in support[1]
    answered = next(c.messages[-1][1] for c in judge.calls if c.task == "no_answer")
    assert "Answer: X is A. X is B . X is C\n" in answered  # vectara's " . ": statements joined by a space


def test_umbrela_prompt_bytes_are_0_3_0s_and_the_oss_variant_is_chosen_by_the_config() -> None:
    standard, oss = load("umbrela.vectara").text, load("umbrela.vectara_oss").text
    assert standard.startswith("\n        Given a query and a passage, you must provide a score on an\n        integer")
    assert standard.endswith("format of: a single integer without any reasoning.\n    ")
    assert "<query>\n        {query}\n        </query>" in oss
    judge = RuleJudge()
    grader = UmbrelaGrader(UmbrelaOptions(prompt="vectara_oss"))
    asyncio.run(grader.grade(judge, "what is x", PASSAGES[0]))
    assert judge.calls[0].messages[-1][1] == oss.format(query="what is x", passage="passage 1 about x")
    assert TrecOptions(profile="vectara").umbrela.prompt == "vectara"  # never picked from the model's name


def test_ap_at_k_beyond_the_passages_is_omitted_like_p_at_k() -> None:
    scores = umbrela_scores([3, 0], [1, 5], pad=False)
    assert scores["ap@1"] == 1.0 and scores["p@1"] == 1.0
    assert scores["ap@5"] is None and scores["p@5"] is None  # vectara skips k > 2 passages
    assert umbrela_scores([3, 0], [5])["ap@5"] == 1.0  # ours (pad): written


def test_the_profile_sends_no_reply_limit() -> None:
    judge = RuleJudge()
    output = RAGOutput(query_id="q", query="what is x", passages=tuple(PASSAGES), answer="X is A [1].")
    asyncio.run(TrecEvaluator(TrecOptions(profile="vectara", metrics=["umbrela", "nuggets"])).evaluate(
        [output], Context(judge=judge)))
    assert judge.calls and all("max_tokens" not in call.params for call in judge.calls)
    judge = RuleJudge()
    asyncio.run(TrecEvaluator(TrecOptions(metrics=["umbrela"])).evaluate([output], Context(judge=judge)))
    assert {call.params["max_tokens"] for call in judge.calls} == {100}  # ours: castorini's limit


def test_rouge_l_both_ways_is_the_rouge_packages_f1() -> None:
    pytest.importorskip("rouge", reason="vectara's ROUGE needs the rouge package (the consistency extra)")
    from open_rag_eval.metrics.similarity import rouge_both_ways

    pair = rouge_both_ways(["the cat sat", "the cat sat down"])[(0, 1)]
    # LCS 3 of 3 and 4 words: P 3/4, R 1 -> F = 2 * 0.75 / (1.75 + 1e-8), the same both ways
    assert pair["rougeL"] == pytest.approx(2 * 0.75 / (1.75 + 1e-8), abs=1e-12)
    assert rouge_both_ways(["...", "a b"]) == {}  # a text of dots: the package refuses it, vectara skips the pair


PEER_CHAINED = """
results_folder: "."
generated_answers: "answers.csv"
judge: {model: simulated-judge, simulated: {}}
evaluator:
  - type: "TRECEvaluator"
    options:
      k_values: [1, 3]
      run_consistency: true
      metrics_to_run_consistency: ["mean_umbrela_score"]
  - type: "ConsistencyEvaluator"
    options:
      metrics:
        - rouge_score: {}
"""


def test_vectaras_documented_chaining_is_one_consistency_evaluator(tmp_path) -> None:
    import yaml

    ours = translate_peer_config(yaml.safe_load(PEER_CHAINED), file="peer.yaml")
    assert ours["evaluators"] == [
        {"type": "trec", "k_values": [1, 3], "runs": "all"},
        {"type": "consistency", "dispersion_of": ["umbrela.mean", "hhem.score"],
         "metrics": ["rouge", "bertscore", "dispersion"]}]
    (tmp_path / "answers.csv").write_text("query_id,query,query_run,passage_id,passage,generated_answer\n"
                                          "q,x?,1,[1],x is y,x is y [1]\n", encoding="utf-8")
    config = load_config_text(PEER_CHAINED, base_dir=tmp_path, file="peer.yaml")  # was "listed twice"
    assert [e.type for e in config.evaluators] == ["trec", "consistency"]


def test_run_consistency_false_scores_the_first_run_only() -> None:
    import yaml

    text = PEER_CHAINED.replace("run_consistency: true", "run_consistency: false").replace(
        '["mean_umbrela_score"]', "[]")
    assert translate_peer_config(yaml.safe_load(text), file="p.yaml")["evaluators"][0]["runs"] == "first"
    outputs = [RAGOutput(query_id="q", query="what is x", run=run, passages=(PASSAGES[run - 1],),
                         answer=f"X is {run} [1].") for run in (1, 2, 3)]
    judge = RuleJudge()
    result = asyncio.run(TrecEvaluator(TrecOptions(profile="vectara", runs="first")).evaluate(
        outputs, Context(judge=judge)))
    assert {score.run for score in result.scores} == {1}
    assert len([c for c in judge.calls if c.task == "umbrela"]) == 1  # 3 with every run


def test_a_json_schema_reply_is_read_as_its_value_and_anything_else_as_text() -> None:
    from open_rag_eval.metrics.structured import VECTARA, as_text, params

    sent = params("umbrela", "vectara")
    assert sent["stream"] is False and sent["response_format"]["json_schema"]["name"] == "UMBRELAScore"
    assert VECTARA["umbrela"]["json_schema"]["schema"]["$defs"]["UMBRELAScoreValues"]["enum"] == ["0", "1", "2", "3"]
    assert as_text('{"score": "2"}', sent) == "2"
    assert as_text('{"nuggets": ["a \\"b\\"", "c"]}', sent) == '["a \\"b\\"", "c"]'
    assert as_text("##final score: 2", sent) == "##final score: 2"  # not JSON: read as text
    assert as_text('{"score": "2", "why": "x"}', sent) == '{"score": "2", "why": "x"}'  # not the schema's object
    assert as_text('{"score": "2"}', {}) == '{"score": "2"}'  # no schema asked: untouched
    assert params("umbrela", "text") == {}


def test_the_first_run_is_the_first_with_an_output() -> None:
    outputs = [RAGOutput(query_id="q", query="what is x", run=1, error="connector failed"),
               *(RAGOutput(query_id="q", query="what is x", run=run, passages=(PASSAGES[0],), answer="X [1].")
                 for run in (2, 3))]
    assert [o.run for o in TrecEvaluator(TrecOptions(runs="first")).scored(outputs)] == [2]
    assert [o.run for o in TrecEvaluator(TrecOptions(runs="first")).scored(outputs[:1])] == [1]  # none answered
