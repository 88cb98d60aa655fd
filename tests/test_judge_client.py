"""The judge client against a real loopback OpenAI-compatible server (tests/openai_server.py)."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import socket
import threading
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from pathlib import Path

import pytest

from open_rag_eval.core.errors import ConfigError, JudgeCallError, JudgeUnavailable, exit_code
from open_rag_eval.judge.accounting import Accounting
from open_rag_eval.judge.settings import JudgeSettings
from open_rag_eval.judge.client import OpenAIJudge, open_judge, strip_reasoning
from open_rag_eval.judge.limits import AdaptiveConcurrency, Limiter, OutageBreaker, RetryPolicy, TokenBucket
from tests.openai_server import Reply, ScriptedServer, ask, config, outcome, with_judge

SECRET = "sk-test-DO-NOT-LEAK-4242"


def test_request_carries_messages_and_final_params() -> None:
    request = ask("the question", system="be strict", params={"temperature": 0, "top_p": 1, "seed": 1})
    cfg = config("", params={"seed": 7, "max_tokens": 5}, drop_params=["top_p"])
    with ScriptedServer([Reply.ok("3", prompt_tokens=120, completion_tokens=4)]) as server:
        cfg = cfg.model_copy(update={"base_url": server.base_url})
        completion = with_judge(cfg, lambda judge: judge.complete(request))
    body = server.completions[0].body
    assert body["model"] == "test-model"
    assert body["messages"] == [{"role": "system", "content": "be strict"}, {"role": "user", "content": "the question"}]
    assert {k: v for k, v in body.items() if k not in ("model", "messages")} == {
        "temperature": 0, "seed": 7, "max_tokens": 5}
    assert (completion.text, completion.cached, completion.prompt_tokens, completion.completion_tokens) == (
        "3", False, 120, 4)
    assert completion.fingerprint == "fp_test"


def _judge_with_sleeps(server: ScriptedServer, sleeps: list[float], **retry: float) -> OpenAIJudge:
    async def record(seconds: float) -> None:
        sleeps.append(seconds)

    settings = JudgeSettings("test-model", (server.base_url,), api_key="k",
                             retry=RetryPolicy(max_retries=3, base_s=0.001, cap_s=0.002, **retry))
    return OpenAIJudge(settings, limiters=[Limiter.create(4)], sleep=record)


def _run_with_sleeps(script: list[Reply], **retry: float) -> tuple[object, list[float], ScriptedServer]:
    sleeps: list[float] = []
    with ScriptedServer(script) as server:
        async def main() -> object:
            async with _judge_with_sleeps(server, sleeps, **retry) as judge:
                return await outcome(judge, ask())
        result = asyncio.run(main())
    return result, sleeps, server


def test_429_with_retry_after_seconds_is_honoured() -> None:
    result, sleeps, server = _run_with_sleeps([Reply.error(429, "slow down", retry_after="2"), Reply.ok("1")])
    assert result.text == "1"
    assert sleeps == [2.0]
    assert len(server.completions) == 2


def test_429_with_retry_after_http_date_is_capped() -> None:
    later = format_datetime(datetime.now(timezone.utc) + timedelta(hours=1), usegmt=True)
    result, sleeps, _ = _run_with_sleeps([Reply.error(429, retry_after=later), Reply.ok("1")], retry_after_cap_s=7)
    assert result.text == "1"
    assert sleeps == [7.0]


def test_429_without_retry_after_backs_off_with_jitter() -> None:
    result, sleeps, server = _run_with_sleeps([Reply.error(429), Reply.error(429), Reply.ok("2")])
    assert result.text == "2"
    assert len(sleeps) == 2 and all(0 <= s <= 0.002 for s in sleeps)
    assert len(server.completions) == 3


def test_500_is_retried_and_counted() -> None:
    with ScriptedServer([Reply.error(500, "boom"), Reply.error(503, "busy"), Reply.ok("0")]) as server:
        result = with_judge(config(server.base_url), lambda judge: _both(judge))
    completion, snapshot = result
    assert completion.text == "0"
    assert snapshot["total"]["calls"] == 1 and snapshot["total"]["retries"] == 2
    assert len(server.completions) == 3


async def _both(judge: OpenAIJudge) -> tuple[object, dict]:
    completion = await outcome(judge, ask())
    return completion, judge.accounting.snapshot()


def test_timeout_is_retried() -> None:
    # a roomy timeout: under load a prompt reply must not time out too (the test counts exactly one retry)
    with ScriptedServer([Reply.ok("late", delay_s=3.0), Reply.ok("on time")]) as server:
        completion, snapshot = with_judge(config(server.base_url, timeout_s=1.0), _both)
    assert completion.text == "on time"
    assert snapshot["total"]["retries"] == 1


def test_connection_refused_fails_after_retries_with_reason() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    error, snapshot = with_judge(config(f"http://127.0.0.1:{port}/v1", max_retries=2), _both)
    assert isinstance(error, JudgeCallError) and not isinstance(error, JudgeUnavailable)
    assert str(error) == f"judge call failed after 3 attempts: cannot connect to http://127.0.0.1:{port}/v1"
    assert snapshot["total"] | {"cost_usd": None} == {
        "calls": 1, "cache_hits": 0, "deduplicated": 0, "retries": 2, "failures": 1,
        "prompt_tokens": 0, "completion_tokens": 0, "usage_unknown": 0, "abandoned": 0, "abandoned_prompt_tokens": 0,
            "cost_usd": None}


def test_malformed_body_is_retried() -> None:
    with ScriptedServer([Reply.malformed(), Reply.ok("fine")]) as server:
        completion, _ = with_judge(config(server.base_url), _both)
    assert completion.text == "fine"
    assert len(server.completions) == 2


def test_failure_after_retries_is_a_judge_call_error_with_the_reason() -> None:
    with ScriptedServer(default=Reply.error(500, "the model is overloaded")) as server:
        error, snapshot = with_judge(config(server.base_url, max_retries=2), _both)
    assert isinstance(error, JudgeCallError) and not isinstance(error, JudgeUnavailable)
    assert str(error) == "judge call failed after 3 attempts: HTTP 500: the model is overloaded"
    assert len(server.completions) == 3
    assert (snapshot["total"]["calls"], snapshot["total"]["retries"], snapshot["total"]["failures"]) == (1, 2, 1)


@pytest.mark.parametrize("status", [401, 403])
def test_auth_error_is_not_retried_and_stops_every_later_call(status: int) -> None:
    async def two_calls(judge: OpenAIJudge) -> list[object]:
        return [await outcome(judge, ask("a")), await outcome(judge, ask("b"))]

    with ScriptedServer(default=Reply.error(status, "Incorrect API key provided")) as server:
        first, second = with_judge(config(server.base_url), two_calls)
    assert len(server.completions) == 1
    assert isinstance(first, JudgeUnavailable) and isinstance(second, JudgeUnavailable)
    assert "Incorrect API key provided" in str(first) and "OPENAI_API_KEY" in str(first)
    assert exit_code(second) == 4


def test_exhausted_quota_is_an_outage_not_a_retry() -> None:
    with ScriptedServer(default=Reply.error(429, "You exceeded your current quota", code="insufficient_quota")) as server:
        error, _ = with_judge(config(server.base_url), _both)
    assert isinstance(error, JudgeUnavailable) and "no quota left" in str(error)
    assert len(server.completions) == 1


def test_unsupported_parameter_is_reported_and_not_retried() -> None:
    rejection = Reply.error(400, "Unsupported value: 'temperature' does not support 0 with this model.",
                            code="unsupported_value", param="temperature")
    with ScriptedServer(default=rejection) as server:
        error, _ = with_judge(config(server.base_url), lambda judge: _both(judge))
    assert isinstance(error, JudgeCallError) and not isinstance(error, JudgeUnavailable)
    assert "'temperature'" in str(error) and "judge.drop_params" in str(error)
    assert len(server.completions) == 1


def test_other_4xx_fails_fast_with_the_server_message() -> None:
    with ScriptedServer(default=Reply.error(400, "messages[0].role must be one of system, user")) as server:
        error, _ = with_judge(config(server.base_url), _both)
    assert str(error) == "HTTP 400: messages[0].role must be one of system, user"
    assert len(server.completions) == 1


def test_sustained_outage_raises_unavailable_and_keeps_judged_work(tmp_path: Path) -> None:
    cfg = config("", max_retries=1, outage_after_failures=3, cache="cache.sqlite")

    async def calls(judge: OpenAIJudge) -> list[object]:
        return [await outcome(judge, ask(f"q{i}")) for i in range(5)]

    with ScriptedServer([Reply.ok("judged")], default=Reply.error(502, "bad gateway")) as server:
        cfg = cfg.model_copy(update={"base_url": server.base_url})
        results = with_judge(cfg, calls, tmp_path)
        seen_during_run = len(server.completions)
        again = with_judge(cfg, lambda judge: judge.complete(ask("q0")), tmp_path)
    assert results[0].text == "judged"
    assert [type(r).__name__ for r in results[1:]] == [
        "JudgeCallError", "JudgeCallError", "JudgeUnavailable", "JudgeUnavailable"]
    assert "3 judge calls failed within" in str(results[3]) and "bad gateway" in str(results[3])
    assert exit_code(results[4]) == 4
    assert seen_during_run == 1 + 3 * 2  # the last call never reached the server
    assert again.cached and again.text == "judged"


def test_concurrency_limit_is_respected_at_the_server() -> None:
    async def many(judge: OpenAIJudge) -> list[object]:
        return await asyncio.gather(*(judge.complete(ask(f"q{i}")) for i in range(12)))

    first_three = threading.Barrier(3, timeout=60)  # no reply before three requests are in (a lower limit fails)
    arrivals = itertools.count(1)

    def respond(body: dict[str, object]) -> Reply:
        if next(arrivals) <= 3:
            first_three.wait()
        return Reply.ok("1")

    with ScriptedServer(responder=respond) as server:
        results = with_judge(config(server.base_url, max_concurrency=3), many)
    assert len(results) == 12 and len(server.completions) == 12
    assert server.max_in_flight == 3


def test_requests_per_minute_paces_arrivals() -> None:
    bucket = TokenBucket(1200, burst_s=0.05)  # 20 requests/s, a burst of 1

    async def many(server: ScriptedServer) -> None:
        judge = OpenAIJudge(JudgeSettings("m", (server.base_url,), api_key="k"),
                            limiters=[Limiter(AdaptiveConcurrency(8), requests=bucket)])
        async with judge:
            await asyncio.gather(*(judge.complete(ask(f"q{i}")) for i in range(6)))

    with ScriptedServer() as server:
        asyncio.run(many(server))
    arrivals = sorted(seen.at for seen in server.completions)
    assert len(arrivals) == 6
    assert arrivals[-1] - arrivals[0] >= (6 - 1) / 20 * 0.9  # can only be slower than the bucket, never faster


def test_identical_requests_in_flight_are_made_once() -> None:
    async def same(judge: OpenAIJudge) -> tuple[list, dict]:
        results = await asyncio.gather(*(judge.complete(ask("same")) for _ in range(5)))
        return results, judge.accounting.snapshot()

    with ScriptedServer(default=Reply.ok("2", delay_s=0.1)) as server:
        results, snapshot = with_judge(config(server.base_url), same)
    assert len(server.completions) == 1
    assert [r.text for r in results] == ["2"] * 5
    assert sorted(r.cached for r in results) == [False, True, True, True, True]
    assert (snapshot["total"]["calls"], snapshot["total"]["deduplicated"]) == (1, 4)


def test_identical_requests_read_from_the_cache_count_one_hit(tmp_path: Path) -> None:
    async def same(judge: OpenAIJudge) -> dict:
        await asyncio.gather(*(judge.complete(ask("same")) for _ in range(5)))
        return judge.accounting.snapshot()["total"]

    with ScriptedServer(default=Reply.ok("2")) as server:
        paid = with_judge(config(server.base_url, cache="c.sqlite"), same, tmp_path)
        read = with_judge(config(server.base_url, cache="c.sqlite"), same, tmp_path)
    assert len(server.completions) == 1
    assert (paid["calls"], paid["cache_hits"], paid["deduplicated"]) == (1, 0, 4)
    assert (read["calls"], read["cache_hits"], read["deduplicated"]) == (0, 1, 4)  # the cache is read once, as paid


def test_cache_hit_and_sample_index(tmp_path: Path) -> None:
    async def three(judge: OpenAIJudge) -> tuple[list, dict]:
        results = [await judge.complete(ask("x")), await judge.complete(ask("x")),
                   await judge.complete(ask("x", sample=1))]
        return results, judge.accounting.snapshot()

    with ScriptedServer([Reply.ok("a"), Reply.ok("b")]) as server:
        results, snapshot = with_judge(config(server.base_url, cache="c.sqlite"), three, tmp_path)
    assert [(r.text, r.cached) for r in results] == [("a", False), ("a", True), ("b", False)]
    assert (snapshot["total"]["calls"], snapshot["total"]["cache_hits"]) == (2, 1)
    assert (tmp_path / "c.sqlite").exists()


def test_reasoning_is_stripped_and_empty_replies_fail_uncached(tmp_path: Path) -> None:
    async def calls(judge: OpenAIJudge) -> list[object]:
        return [await outcome(judge, ask("think")), await outcome(judge, ask("empty")),
                await outcome(judge, ask("empty"))]

    script = [Reply.ok("<think>\nweighing it\n</think>\n\n2"), Reply.ok("<think>only thoughts</think>"),
              Reply.ok("")]
    with ScriptedServer(script) as server:
        results = with_judge(config(server.base_url, cache="c.sqlite"), calls, tmp_path)
    assert results[0].text == "2"
    assert all(isinstance(r, JudgeCallError) and str(r).startswith("empty reply") for r in results[1:])
    assert len(server.completions) == 3  # the failed reply was not cached


def test_strip_reasoning_variants() -> None:
    assert strip_reasoning("<think>a</think>b<think>c</think> d") == "b d"
    assert strip_reasoning("reasoning that began in the template</think>\nFinal: 3") == "Final: 3"
    assert strip_reasoning("<think>cut off by the token limit") == ""
    assert strip_reasoning("  plain  ") == "plain"


def test_missing_key_is_a_config_error_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MY_JUDGE_KEY", raising=False)
    with pytest.raises(ConfigError) as caught:
        open_judge(config("https://api.example.com/v1", api_key_env="MY_JUDGE_KEY"), base_dir=Path("."))
    assert "MY_JUDGE_KEY" in str(caught.value) and caught.value.path == "judge.api_key_env"


def test_local_endpoints_need_no_key_and_openai_base_url_is_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:11434/v1/")
    with ScriptedServer() as server:
        completion = with_judge(config(server.base_url), lambda judge: judge.complete(ask()))
        judge = open_judge(config("").model_copy(update={"base_url": None}), base_dir=Path("."))
        asyncio.run(judge.aclose())
    assert completion.text == "ok" and "authorization" in {k.lower() for k in server.completions[0].headers}
    assert judge.base_url == "http://localhost:11434/v1"


def test_key_is_sent_but_never_logged_or_raised(monkeypatch: pytest.MonkeyPatch,
                                                caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("JUDGE_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    script = [Reply.error(500, f"upstream rejected {SECRET}"), Reply.error(500, f"upstream rejected {SECRET}"),
              Reply.error(400, f"Unsupported parameter: 'seed' with key {SECRET}"),
              Reply.error(401, f"Incorrect API key provided: {SECRET}")]

    async def calls(judge: OpenAIJudge) -> list[object]:
        return [await outcome(judge, ask(f"q{i}")) for i in range(4)]

    with ScriptedServer(script) as server:
        cfg = config(server.base_url, api_key_env="JUDGE_KEY", max_retries=1)
        errors, snapshot = with_judge(cfg, lambda judge: _calls_and_snapshot(judge, calls))
    assert server.completions[0].headers["authorization"] == f"Bearer {SECRET}"
    assert [type(e).__name__ for e in errors] == ["JudgeCallError", "JudgeCallError", "JudgeUnavailable",
                                                  "JudgeUnavailable"]
    texts = [str(e) for e in errors] + [repr(e) for e in errors] + [caplog.text, json.dumps(snapshot)]
    assert all(SECRET not in text for text in texts)
    assert "***" in str(errors[0])


async def _calls_and_snapshot(judge: OpenAIJudge, calls) -> tuple[list, dict]:  # type: ignore[no-untyped-def]
    return await calls(judge), judge.accounting.snapshot()


def test_adaptive_concurrency_lowers_on_429_then_recovers() -> None:
    limiter = Limiter.create(8)
    script = [Reply.error(429, retry_after="0")] + [Reply.ok(str(i)) for i in range(40)]

    async def main(server: ScriptedServer) -> list[int]:
        settings = JudgeSettings("m", (server.base_url,), api_key="k", retry=RetryPolicy(base_s=0.001, cap_s=0.002))
        judge = OpenAIJudge(settings, limiters=[limiter], breaker=OutageBreaker(), accounting=Accounting("m"))
        async with judge:
            await judge.complete(ask("first"))
            lowered = limiter.concurrency.limit
            for i in range(30):
                await judge.complete(ask(f"q{i}"))
            return [lowered, limiter.concurrency.limit]

    with ScriptedServer(script) as server:
        lowered, recovered = asyncio.run(main(server))
    assert lowered == 4  # halved once; 4 successes bring it to 5, 5 more to 6, ...
    assert recovered == 8
