"""Every failed judgment says what was wrong: the parsers name the problem of a reply (a count that does not match,
a label outside the set, no label at all), and a call that keeps timing out against a real slow loopback server is
retried once with the same deadline, once with twice it, then fails saying so, its abandoned work counted."""

from __future__ import annotations

import json
from typing import Any

from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.core.parsing import classify_labels, classify_no_answer, classify_support
from open_rag_eval.metrics.claims import parse_claims, parse_verdicts
from tests.openai_server import Reply, ScriptedServer, ask, config, outcome, with_judge

ASSIGN = ("support", "partial_support", "not_support")


def test_the_parsers_say_what_was_wrong() -> None:
    assert classify_labels('["support", "not_support"]', 4, ASSIGN).problem == "2 labels for 4 nuggets"
    assert classify_labels("support, support", 2, ASSIGN).problem == "not a list of labels"
    assert classify_labels('["support", "maybe"]', 2, ASSIGN, "strict").problem == (
        "label 'maybe' outside the set (not_support, partial_support, support)")
    assert classify_support("The statement is backed.").problem == (
        "no support label (Full Support, Partial Support or No Support) in the reply")
    assert classify_no_answer("Perhaps.").problem == "the reply is neither yes nor no ('Perhaps.')"
    two = json.dumps({"verdicts": [{"claim": 1, "supported": True, "sources": [1]},
                                   {"claim": 2, "supported": False, "sources": []}]})
    assert parse_verdicts(two, 4, 2).problem == "2 verdicts for 4 claims"
    assert parse_verdicts("Claim 1 is supported.", 1, 1).problem == "not one JSON object"
    assert parse_claims('{"refusal": false, "claims": [{"sentence": 3, "claim": "x"}]}', 2).problem == (
        "a claim names sentence 3 of 2")


async def _one(judge: Any) -> Any:
    return await outcome(judge, ask("grade this"))


def test_a_call_that_keeps_timing_out_is_tried_twice_more_then_fails_naming_its_deadlines() -> None:
    slow = Reply.ok("2", delay_s=1.0)
    with ScriptedServer([slow, slow, slow, Reply.ok("2")]) as server:
        error, snapshot = with_judge(config(server.base_url, timeout_s=0.25, max_retries=6),
                                     lambda judge: _with_usage(judge))
    assert isinstance(error, JudgeCallError)
    assert str(error) == ("timed out 3 times (deadlines 0.25s, 0.25s, 0.5s): the judge did not answer in time; "
                          "raise judge.timeout_s for a slow server")
    assert len(server.completions) == 3  # not the 7 attempts max_retries allows
    total = snapshot["total"]
    assert (total["calls"], total["retries"], total["abandoned"], total["abandoned_prompt_tokens"]) == (1, 2, 3, 3 * 6)


def test_the_longer_deadline_lets_a_slow_reply_through() -> None:
    with ScriptedServer([Reply.ok("1", delay_s=0.6), Reply.ok("1", delay_s=0.6), Reply.ok("3", delay_s=0.4)]) as server:
        done, snapshot = with_judge(config(server.base_url, timeout_s=0.3, max_retries=6), _with_usage)
    assert done.text == "3" and len(server.completions) == 3
    assert snapshot["total"]["abandoned"] == 2


async def _with_usage(judge: Any) -> tuple[Any, dict[str, Any]]:
    return await _one(judge), judge.accounting.snapshot()
