"""What a judge reply is: a judgment, a refusal or a failure with its reason -- against a loopback OpenAI server
that misbehaves the way real endpoints do (reasoning models, content filters, local servers, proxies)."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from open_rag_eval.core.errors import JudgeCallError, JudgeUnavailable
from open_rag_eval.judge.base import Completion
from open_rag_eval.judge.client import OpenAIJudge, open_transport
from open_rag_eval.judge.settings import JudgeSettings
from open_rag_eval.judge.config import is_simulated_fingerprint, simulated_fingerprint
from open_rag_eval.judge.limits import Limiter, RetryPolicy
from open_rag_eval.judge.replies import Failure, Judgment, classify_body
from tests.openai_server import Reply, ScriptedServer, ask, config, outcome, with_judge

EMPTY_OR_CUT = {
    "content null": (Reply.shaped({"role": "assistant", "content": None}), "content null"),
    "content missing": (Reply.shaped({"role": "assistant"}), "content missing"),
    "content parts without text": (
        Reply.shaped({"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}),
        "content list without text"),
    "bare strings, not content parts": (Reply.shaped({"role": "assistant", "content": ["0"]}), "content list without text"),
    "only reasoning": (Reply.shaped({"role": "assistant", "content": "<think>2 or 3?</think>"}), "only reasoning"),
    "empty string": (Reply.shaped({"role": "assistant", "content": "  "}), "empty content"),
    "reasoning spent the cap": (
        Reply.shaped({"role": "assistant", "content": "", "reasoning_content": "let me think"},
                     finish_reason="length", usage={"prompt_tokens": 300, "completion_tokens": 100}),
        "cut off by the token limit after 100 tokens"),
    "cut with text": (Reply.shaped({"role": "assistant", "content": "The passage is rel"}, finish_reason="length"),
                      "finish_reason: length"),
    "content filter": (Reply.shaped({"role": "assistant", "content": "##final score: 3"},
                                    finish_reason="content_filter"), "content filter"),
    "context_length_exceeded": (Reply.error(400, "This model's maximum context length is 8192 tokens",
                                            code="context_length_exceeded"), "does not fit the judge's context"),
    "413": (Reply.error(413, "payload too large"), "HTTP 413: payload too large"),
    "422": (Reply.error(422, "field required: messages.0.content"), "HTTP 422: field required"),
    "llama.cpp overflow": (Reply.error(400, "the request exceeds the available context size, try increasing it"),
                           "does not fit the judge's context"),
}


@pytest.mark.parametrize("name", list(EMPTY_OR_CUT))
def test_an_empty_cut_or_rejected_reply_is_a_failure_with_its_reason_sent_once_never_cached(
        name: str, tmp_path: Path) -> None:
    reply, reason = EMPTY_OR_CUT[name]

    async def twice(judge: OpenAIJudge) -> list[Any]:
        return [await outcome(judge, ask("grade")), await outcome(judge, ask("grade"))]

    with ScriptedServer(default=reply) as server:
        results = with_judge(config(server.base_url, cache="c.sqlite"), twice, tmp_path)
    for result in results:
        assert isinstance(result, JudgeCallError) and not isinstance(result, JudgeUnavailable), result
        assert reason in str(result) and not result.refused
    assert len(server.completions) == 2  # not retried (it would get the same), not cached (asked again)


def test_text_parts_are_joined_into_one_judgment() -> None:
    parts = [{"type": "text", "text": "##final "}, {"type": "image_url"}, {"type": "text", "text": "score: 2"}]
    with ScriptedServer([Reply.shaped({"role": "assistant", "content": parts})]) as server:
        completion = with_judge(config(server.base_url), lambda judge: judge.complete(ask()))
    assert completion.text == "##final score: 2"


def test_a_refusal_is_a_failure_marked_refused() -> None:
    message = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    with ScriptedServer(default=Reply.shaped(message)) as server:
        error = with_judge(config(server.base_url), lambda judge: outcome(judge, ask()))
    assert isinstance(error, JudgeCallError) and error.refused
    assert str(error) == "the judge refused: I can't help with that."
    assert len(server.completions) == 1


def test_an_endpoint_rejecting_max_tokens_points_to_max_tokens_param() -> None:
    rejection = Reply.error(400, "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                 "Use 'max_completion_tokens' instead.", code="unsupported_parameter", param="max_tokens")
    with ScriptedServer(default=rejection) as server:
        error = with_judge(config(server.base_url), lambda judge: outcome(judge, ask(params={"max_tokens": 100})))
    assert "judge.max_tokens_param: max_completion_tokens" in str(error)


def test_max_tokens_param_sends_the_cap_as_max_completion_tokens_and_drop_params_keeps_it() -> None:
    cfg = {"max_tokens_param": "max_completion_tokens", "drop_params": ["max_tokens", "temperature"]}
    with ScriptedServer() as server:
        with_judge(config(server.base_url, **cfg),
                   lambda judge: judge.complete(ask(params={"temperature": 0, "max_tokens": 100})))
        with_judge(config(server.base_url), lambda judge: judge.complete(ask(params={"max_completion_tokens": 50})))
    first, second = (seen.body for seen in server.completions)
    assert (first.get("max_completion_tokens"), "max_tokens" in first, "temperature" in first) == (100, False, False)
    assert (second.get("max_tokens"), "max_completion_tokens" in second) == (50, False)


def test_a_prompt_beyond_context_tokens_fails_without_a_call() -> None:
    long = "word " * 2000  # about 2,500 tokens by the client's estimate
    with ScriptedServer() as server:
        cfg = config(server.base_url, context_tokens=2048)
        error = with_judge(cfg, lambda judge: outcome(judge, ask(long, params={"max_tokens": 100})))
        fits = with_judge(cfg, lambda judge: judge.complete(ask("short", params={"max_tokens": 100})))
    assert isinstance(error, JudgeCallError) and "do not fit judge.context_tokens (2048)" in str(error)
    assert "no call was made" in str(error) and fits.text == "ok"
    assert len(server.completions) == 1


def test_a_context_overflow_lowers_the_concurrency_like_a_429() -> None:
    """A local server sharing one context among its parallel slots overflows because of the load."""
    overflow = Reply.error(400, "the request exceeds the available context size, try increasing it")

    async def run(judge: OpenAIJudge) -> tuple[Any, int]:
        return await outcome(judge, ask()), judge.limiter.concurrency.limit

    with ScriptedServer(default=overflow) as server:
        error, limit = with_judge(config(server.base_url, max_concurrency=8), run)
    assert isinstance(error, JudgeCallError) and limit == 4


# -- usage, cost and fingerprints ------------------------------------------------------------------------------

def _snapshot(reply: Reply, model: str = "gpt-4o-mini") -> dict[str, Any]:
    async def run(judge: OpenAIJudge) -> dict[str, Any]:
        await judge.complete(ask())
        return judge.accounting.snapshot()

    with ScriptedServer([reply]) as server:
        return with_judge(config(server.base_url, model=model), run)


@pytest.mark.parametrize("usage", [None, {}, {"prompt_tokens": -5, "completion_tokens": 2},
                                   {"prompt_tokens": 10**30, "completion_tokens": 2},
                                   {"prompt_tokens": 1.5, "completion_tokens": 2},
                                   {"prompt_tokens": "10", "completion_tokens": 2}, "lots"])
def test_a_reply_without_valid_usage_makes_a_priced_cost_unknown_not_zero(usage: Any) -> None:
    snapshot = _snapshot(Reply.shaped(usage=usage))
    total = snapshot["total"]
    assert total["cost_usd"] is None and total["usage_unknown"] == 1
    assert (total["prompt_tokens"], total["completion_tokens"]) == (0, 0)


def test_valid_usage_is_priced() -> None:
    total = _snapshot(Reply.shaped(usage={"prompt_tokens": 1000, "completion_tokens": 100}))["total"]
    assert total["cost_usd"] == pytest.approx((1000 * 0.15 + 100 * 0.60) / 1e6) and total["usage_unknown"] == 0


@pytest.mark.parametrize("fingerprint", [{"id": "fp"}, ["fp"], 42, ""])
def test_a_fingerprint_that_is_not_a_string_is_recorded_as_none(fingerprint: Any) -> None:
    assert _snapshot(Reply.shaped(fingerprint=fingerprint))["fingerprints"] == []


def test_only_our_simulator_s_fingerprints_say_simulated() -> None:
    assert is_simulated_fingerprint(simulated_fingerprint("0.1|0"))
    assert not is_simulated_fingerprint("fp_sim_0123456789")  # a real endpoint's fingerprint with the prefix
    assert not is_simulated_fingerprint("fp_sim_0123456789_000000000000")
    assert not is_simulated_fingerprint({"fp_sim_": 1})


# -- property: any body shape is a judgment or a failure with a reason -------------------------------------------

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
                    max_leaves=12)
CONTENT = st.one_of(st.none(), st.text(max_size=12), st.sampled_from(["", " ", "<think>x</think>", "2"]),
                    st.lists(st.one_of(st.dictionaries(st.sampled_from(["type", "text"]), st.text(max_size=5)), JSON),
                             max_size=3), JSON)
MESSAGE = st.one_of(st.fixed_dictionaries({"role": st.just("assistant")},
                                          optional={"content": CONTENT, "refusal": st.one_of(st.none(), st.text())}),
                    JSON)
USAGE = st.one_of(st.none(), JSON, st.fixed_dictionaries({
    "prompt_tokens": st.one_of(st.integers(-10, 10**31), st.floats(), JSON),
    "completion_tokens": st.one_of(st.integers(-10, 10**31), st.floats(), JSON)}))
CHOICE = st.one_of(st.fixed_dictionaries({"message": MESSAGE}, optional={
    "finish_reason": st.one_of(st.sampled_from(["stop", "length", "content_filter", "tool_calls"]), JSON)}), JSON)
BODY = st.one_of(JSON, st.fixed_dictionaries({"choices": st.one_of(st.lists(CHOICE, max_size=2), JSON)},
                                             optional={"usage": USAGE, "system_fingerprint": JSON}))


def _empty_or_stopped(body: Any) -> bool:
    try:
        choice = body["choices"][0]
        content, finish = choice["message"].get("content"), choice.get("finish_reason")
    except (KeyError, IndexError, TypeError, AttributeError):
        return True
    text = content if isinstance(content, str) else "".join(
        p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)) if isinstance(
        content, list) else ""
    return finish in ("length", "content_filter") or not text.strip() or bool(choice["message"].get("refusal"))


@settings(max_examples=400, deadline=None)
@given(BODY)
def test_any_body_is_a_judgment_with_text_or_a_failure_with_a_reason(body: Any) -> None:
    verdict = classify_body(body)
    if isinstance(verdict, Judgment):
        assert verdict.text.strip() and not _empty_or_stopped(body)
        assert verdict.fingerprint is None or isinstance(verdict.fingerprint, str)
        for count in (verdict.usage.prompt_tokens, verdict.usage.completion_tokens):
            assert count is None or (isinstance(count, int) and 0 <= count <= 10**9)
    else:
        assert isinstance(verdict, Failure) and verdict.reason and verdict.kind in ("retry", "fail", "refuse")


def _mock_judge(body: Any) -> OpenAIJudge:
    raw = json.dumps(body, allow_nan=True).encode()

    def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=raw, headers={"content-type": "application/json"})

    async def no_sleep(seconds: float) -> None:
        return None

    judge_settings = JudgeSettings("gpt-4o-mini", ("http://judge.test/v1",), api_key="k",
                                   retry=RetryPolicy(max_retries=1))
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    return OpenAIJudge(judge_settings, limiters=[Limiter.create(2)], sleep=no_sleep,
                       transport=open_transport(judge_settings, http_client=http))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BODY)
def test_through_the_client_any_body_is_a_completion_or_a_judge_call_error(body: Any) -> None:
    async def main() -> Any:
        async with _mock_judge(body) as judge:
            result = await outcome(judge, ask())
            return result, judge.accounting.snapshot()

    logging.getLogger("open_rag_eval.judge").setLevel(logging.ERROR)
    result, snapshot = asyncio.run(main())
    if isinstance(result, Completion):
        assert result.text.strip() and not _empty_or_stopped(body)
    else:
        assert isinstance(result, JudgeCallError) and str(result), repr(result)
    cost = snapshot["total"]["cost_usd"]
    assert cost is None or (math.isfinite(cost) and cost >= 0)
    assert all(isinstance(fp, str) for fp in snapshot["fingerprints"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(BODY)
@example({"choices": [{"message": {"role": "assistant", "content": ["0"]}}]})  # a bare string is no content part
def test_umbrela_never_grades_a_reply_the_judge_did_not_give(body: Any) -> None:
    """Through the real client and the UMBRELA grader: an empty, cut, filtered or refused reply, or any body that is
    not a chat completion, is a missing grade with a reason -- never grade 0 or any other."""
    from open_rag_eval.metrics.umbrela import UmbrelaGrader
    from open_rag_eval.core.types import Passage

    async def main() -> Any:
        async with _mock_judge(body) as judge:
            return await UmbrelaGrader().grade(judge, "what is x", Passage(id="1", text="x is y"))

    logging.getLogger("open_rag_eval.judge").setLevel(logging.ERROR)
    grade = asyncio.run(main())
    if _empty_or_stopped(body) or isinstance(classify_body(body), Failure):
        assert grade.grade is None and grade.status == "failed" and grade.reason
    else:
        assert grade.grade in (0, 1, 2, 3)


@pytest.mark.parametrize(("reask", "params", "temperatures"), [
    ("repeat", {}, [0.0, 0.2, 0.2]), ("repeat", {"temperature": 0}, [0]), ("repeat", {"seed": 7}, [0.0, 0.2]),
    ("corrective", {}, [0.0, 0.2, 0.2]), ("corrective", {"temperature": 0}, [0, 0]),
    ("corrective", {"seed": 7}, [0.0, 0.2])])
def test_a_nugget_re_ask_is_sent_only_when_it_can_differ(reask: str, params: dict[str, Any],
                                                         temperatures: list[float]) -> None:
    """Re-asks go at temperature 0.2: they differ from the greedy first request and sample. Repeated (judge.reask:
    repeat) with judge.params forcing temperature 0, every re-ask would be byte-identical (none is sent); with a
    fixed seed the second request differs from the first (temperature) but the third would repeat the second. A
    corrective re-ask carries the bad reply and what was wrong with it, so the first re-ask differs even at
    temperature 0; a second one after the same bad reply would repeat it (not sent)."""
    from open_rag_eval.metrics.nuggets import Nuggetizer, NuggetOptions

    async def create(judge: OpenAIJudge) -> Any:
        return await Nuggetizer(NuggetOptions(max_trials=3)).create(judge, "what is x", ["x is y"])

    with ScriptedServer(default=Reply.ok("no list here")) as server:
        texts, status, notes = with_judge(config(server.base_url, params=params, reask=reask), create)
    assert (texts, status) == ([], "failed")
    assert [seen.body["temperature"] for seen in server.completions] == temperatures


def test_a_re_ask_quotes_a_bounded_part_of_a_long_bad_reply() -> None:
    """A 1 MB unreadable reply goes back in each re-ask as its head and tail around a marker counting the cut
    characters, not whole (issue: a 3 MB reply went back three times, ~770k prompt tokens each); a short bad reply
    goes back whole."""
    from open_rag_eval.metrics.nuggets import Nuggetizer, NuggetOptions

    async def create(judge: OpenAIJudge) -> Any:
        return await Nuggetizer(NuggetOptions(max_trials=3)).create(judge, "what is x", ["x is y"])

    long_reply = "HEAD-" + "x" * 1_000_000 + "-TAIL"
    with ScriptedServer(default=Reply.ok(long_reply)) as server:
        with_judge(config(server.base_url), create)
    re_asks = server.completions[1:]
    assert len(re_asks) == 2
    for seen in re_asks:
        quoted = [m["content"] for m in seen.body["messages"] if m["role"] == "assistant"]
        assert len(quoted) == 1
        cut = len(long_reply) - 4000  # the first and last 2000 characters are kept
        assert quoted[0].startswith("HEAD-") and quoted[0].endswith("-TAIL")
        assert f"[… {cut:,} characters cut …]" in quoted[0]
        assert len(quoted[0]) < 4100
        assert len(json.dumps(seen.body)) < 20_000
    with ScriptedServer(default=Reply.ok("no list here")) as server:
        with_judge(config(server.base_url), create)
    assert [m["content"] for m in server.completions[1].body["messages"] if m["role"] == "assistant"] == \
        ["no list here"]
