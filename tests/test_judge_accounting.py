"""Accounting numbers, the price table and its overrides."""

from __future__ import annotations

import json

from open_rag_eval.judge.accounting import DEFAULT_PRICES, Accounting, price_for
from open_rag_eval.judge.config import JudgeConfig, Price
from tests.openai_server import Reply, ScriptedServer, ask, config, with_judge


def test_price_lookup_and_overrides() -> None:
    assert price_for("gpt-4o-mini") == Price(input=0.15, output=0.60)
    assert price_for("gpt-4o-mini-2024-07-18") == Price(input=0.15, output=0.60)
    assert price_for("gpt-4o-audio-preview") is None  # not a dated snapshot of gpt-4o: unknown, not guessed
    assert price_for("llama3.1:8b") is None
    assert price_for("llama3.1:8b", Price(input=0, output=0)) == Price(input=0, output=0)
    assert price_for("gpt-4o", {"gpt-4o": Price(input=1, output=2)}) == Price(input=1, output=2)
    assert price_for("gpt-4.1-nano", {"gpt-4o": Price(input=1, output=2)}) == Price(input=0.10, output=0.40)
    assert {"gpt-4o", "gpt-4.1", "gpt-5", "gpt-5-mini", "o3", "o4-mini"} <= set(DEFAULT_PRICES)


def test_config_accepts_one_price_or_a_table() -> None:
    assert JudgeConfig(prices={"input": 1, "output": 2}).prices == Price(input=1, output=2)
    assert JudgeConfig(prices={"my-model": {"input": 1, "output": 2}}).prices == {"my-model": Price(input=1, output=2)}


def test_snapshot_numbers_per_task_and_total() -> None:
    accounting = Accounting("gpt-4o-mini", price_for("gpt-4o-mini"))
    accounting.task("umbrela").calls += 2
    accounting.usage("umbrela", 1000, 200, "fp_a")
    accounting.usage("umbrela", 500, 100, "fp_b")
    accounting.task("support").cache_hits += 3
    snapshot = accounting.snapshot()
    assert snapshot["tasks"]["umbrela"] == {
        "calls": 2, "cache_hits": 0, "deduplicated": 0, "retries": 0, "failures": 0,
        "prompt_tokens": 1500, "completion_tokens": 300, "usage_unknown": 0, "abandoned": 0,
        "abandoned_prompt_tokens": 0, "cost_usd": 0.000405}
    assert snapshot["tasks"]["support"]["cost_usd"] == 0.0
    assert snapshot["total"]["cache_hits"] == 3 and snapshot["total"]["cost_usd"] == 0.000405
    assert snapshot["fingerprints"] == ["fp_a", "fp_b"]
    assert snapshot["price_per_million"] == {"input": 0.15, "output": 0.6}
    json.dumps(snapshot)  # plain data


def test_unknown_price_gives_no_cost() -> None:
    accounting = Accounting("local-model")
    accounting.usage("umbrela", 1000, 200, None)
    assert accounting.snapshot()["total"]["cost_usd"] is None


def test_accounting_through_the_client() -> None:
    async def run(judge):  # type: ignore[no-untyped-def]
        await judge.complete(ask("a", task="umbrela"))
        await judge.complete(ask("b", task="support"))
        return judge.accounting.snapshot()

    script = [Reply.error(429, retry_after="0"), Reply.ok("1", prompt_tokens=2000, completion_tokens=10),
              Reply.ok("yes", prompt_tokens=100, completion_tokens=1, fingerprint="fp_other")]
    with ScriptedServer(script) as server:
        snapshot = with_judge(config(server.base_url, model="gpt-4o"), run)
    assert snapshot["model"] == "gpt-4o"
    assert snapshot["tasks"]["umbrela"] | {} == {
        "calls": 1, "cache_hits": 0, "deduplicated": 0, "retries": 1, "failures": 0,
        "prompt_tokens": 2000, "completion_tokens": 10, "usage_unknown": 0, "abandoned": 0,
        "abandoned_prompt_tokens": 0, "cost_usd": 0.0051}
    assert snapshot["tasks"]["support"]["cost_usd"] == 0.00026
    assert snapshot["total"]["cost_usd"] == 0.00536
    assert snapshot["fingerprints"] == ["fp_other", "fp_test"]
