"""Token log-probabilities from a real (loopback) OpenAI-compatible judge to ``type: criteria`` with
``scoring: logprobs``: the request asks for them, the reply reader reads them, the judge cache keeps them with the
reply (a cache written before stays readable), the record/replay tape gives them back, and the metric weights the
grade with them -- or says it used the written grade. Literal numbers: docs/criteria.md's worked example."""

from __future__ import annotations

import asyncio
import math
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.core.types import EvalResult, RAGOutput
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.criteria import CriteriaEvaluator, CriteriaOptions
from open_rag_eval.judge.cache import CachedCompletion, JudgeCache, cache_key, read_entries
from open_rag_eval.judge.client import open_judge
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.replay import open_taped_judge
from open_rag_eval.judge.replies import classify_body, read_logprobs
from tests.openai_server import FAST, Reply, ScriptedServer, ask, azure_door, completion_body, outcome

REPLY = '{"reason": "Polite but curt.", "score": 4}'
TOKENS = ['{"', "reason", '":', ' "', "Polite but curt.", '",', ' "', "score", '":', " ", "4", "}"]
# at the grade's position: p(3) = 0.5, p(4) = 0.3, p(5) = 0.1, and 0.1 on a token off the scale
GRADE_TOP = [("3", 0.5), ("4", 0.3), ("5", 0.1), (" four", 0.1)]
OLD_SCHEMA = """CREATE TABLE completions (key TEXT PRIMARY KEY, text TEXT NOT NULL, prompt_tokens INTEGER NOT NULL,
completion_tokens INTEGER NOT NULL, fingerprint TEXT, model TEXT NOT NULL, created REAL NOT NULL)"""


def _logprob_body(top: list[tuple[str, float]] | None = GRADE_TOP, *, text: str = REPLY) -> dict[str, Any]:
    """A chat completion as OpenAI returns it with ``logprobs: true, top_logprobs: N`` (None: ``logprobs: null``)."""
    body = completion_body(text)
    if top is None:
        body["choices"][0]["logprobs"] = None
        return body
    content = [{"token": t, "logprob": -0.01, "bytes": list(t.encode()),
                "top_logprobs": [{"token": t, "logprob": -0.01, "bytes": list(t.encode())}]} for t in TOKENS]
    grade = TOKENS.index("4")
    content[grade]["top_logprobs"] = [{"token": t, "logprob": math.log(p), "bytes": list(t.encode())}
                                      for t, p in top]
    body["choices"][0]["logprobs"] = {"content": content, "refusal": None}
    return body


def _output() -> RAGOutput:
    from open_rag_eval.inputs import read_outputs  # noqa: PLC0415

    data = Path(__file__).parent / "data" / "generation_outputs.jsonl"
    return next(o for o in read_outputs(data) if o.query_id == "seasons")


def _evaluate(cfg: JudgeConfig, base_dir: Path, scoring: str = "logprobs") -> tuple[float, dict[str, Any], bool]:
    """The value of one criterion (tone, 1-5) for one output, its detail row, and whether the reply was cached."""
    evaluator = CriteriaEvaluator(CriteriaOptions.model_validate({
        "scoring": scoring, "criteria": [{"name": "tone", "question": "Is the tone polite?", "scale": "1-5"}]}))

    async def main() -> tuple[EvalResult, bool]:
        async with open_judge(cfg, base_dir=base_dir) as judge:
            result = await evaluator.evaluate([_output()], Context(judge=judge))
            return result, judge.accounting.task("criteria").cache_hits > 0

    result, cached = asyncio.run(main())
    score = result.scores[0]
    assert score.error is None, score.error
    row = next(d for d in result.details if d.section == "criteria").data["criteria"][0]
    return float(score.value), row, cached  # type: ignore[arg-type]


def _config(server: ScriptedServer, cache: object = False) -> JudgeConfig:
    return JudgeConfig(model="test-model", base_url=server.base_url, cache=cache, **FAST)


def test_the_judge_s_logprobs_weight_the_grade_and_come_back_from_the_cache(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply(200, _logprob_body())) as server:
        value, row, cached = _evaluate(_config(server, "cache.sqlite"), tmp_path)
        again, row_again, cached_again = _evaluate(_config(server, "cache.sqlite"), tmp_path)
    body = server.completions[0].body
    assert (body["logprobs"], body["top_logprobs"]) == (True, 20)
    # (3 x 0.5 + 4 x 0.3 + 5 x 0.1) / 0.9 = 3.555556 -> (3.555556 - 1) / 4
    assert row["scoring"] == "logprobs" and row["weighted_grade"] == 3.555556 and row["grade"] == 4
    assert value == pytest.approx(0.638889, abs=1e-6)
    assert not cached and cached_again and len(server.completions) == 1  # the second run read the cache alone
    assert (again, row_again) == (value, row)


def test_azure_openai_gets_the_same_request_and_its_logprobs_are_read(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_JUDGE_KEY", "azure-test-key-5521")
    door = azure_door("judge-dep", "2024-10-21", "azure-test-key-5521")
    with ScriptedServer(default=Reply(200, _logprob_body()), door=door) as server:
        cfg = JudgeConfig(model="gpt-4o-mini", base_url=server.origin, api_key_env="AZURE_JUDGE_KEY", cache=False,
                          azure={"api_version": "2024-10-21", "deployment": "judge-dep"}, **FAST)
        value, row, _ = _evaluate(cfg, tmp_path)
    seen = server.completions[0]
    assert seen.path.startswith("/openai/deployments/judge-dep/chat/completions?")
    assert (seen.body["logprobs"], seen.body["top_logprobs"]) == (True, 20)
    assert (row["scoring"], row["weighted_grade"]) == ("logprobs", 3.555556) and value == pytest.approx(0.638889,
                                                                                                      abs=1e-6)


@pytest.mark.parametrize(("top", "said"), [
    (None, "label (the judge returned no log-probabilities for the grade)"),
    ([(" four", 0.6), ("x", 0.4)], "label (no log-probability on a value of the scale where the grade is written)"),
])
def test_without_logprobs_on_the_scale_the_written_grade_is_used_and_said(tmp_path: Path, top: Any, said: str) -> None:
    with ScriptedServer(default=Reply(200, _logprob_body(top))) as server:
        value, row, _ = _evaluate(_config(server, "cache.sqlite"), tmp_path)
        again, row_again, cached = _evaluate(_config(server, "cache.sqlite"), tmp_path)
    assert (value, row["scoring"], "weighted_grade" in row) == (0.75, said, False)  # (4 - 1) / 4
    assert (again, row_again["scoring"], cached) == (0.75, said, True)


def test_a_request_without_logprobs_keeps_its_body_and_cache_key(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply.ok(REPLY)) as server:
        value, row, _ = _evaluate(_config(server), tmp_path, scoring="label")
    assert sorted(server.completions[0].body) == ["max_tokens", "messages", "model", "temperature"]
    assert (value, row["scoring"]) == (0.75, "label")
    key = cache_key(base_url="http://h/v1", model="m", messages=(("user", "q"),),
                    params={"temperature": 0, "max_tokens": 300}, prompt_version="v1", sample=0)
    assert key == "6b44b66fde1d3e7abf69a2df030e7889d4b7563f80d277824d820723a374d1ff"  # as before logprobs were kept


def test_a_cache_written_before_opens_and_keeps_logprobs_from_then_on(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    old = sqlite3.connect(path)
    old.execute(OLD_SCHEMA)
    old.execute("INSERT INTO completions VALUES ('k1', 'yes', 3, 1, 'fp', 'm', 1.5)")
    old.commit()
    old.close()
    cache = JudgeCache(path)
    try:
        assert cache.get_sync("k1") == CachedCompletion("yes", 3, 1, "fp", "m", 1.5, None)
        kept = ((" 4", ((" 4", -0.25), (" 5", -1.5))), ("}", ()))
        cache.put_sync("k2", CachedCompletion("4", 5, 2, None, "m", 2.0, kept))
        assert cache.get_sync("k2") == CachedCompletion("4", 5, 2, None, "m", 2.0, kept)
        cache.put_sync("k2", CachedCompletion("5", 5, 2, None, "m", 3.0))  # stored again without them
        assert cache.get_sync("k2") == CachedCompletion("5", 5, 2, None, "m", 3.0, None)
        cache.put_sync("k3", CachedCompletion("3", 5, 2, None, "m", 4.0, kept))
        reader = sqlite3.connect(path)
        assert {key: entry.logprobs for key, entry in read_entries(reader)} == {"k1": None, "k2": None, "k3": kept}
        reader.execute("DELETE FROM completions WHERE key = 'k3'")  # a purge takes the log-probabilities along
        reader.commit()
        assert reader.execute("SELECT COUNT(*) FROM logprobs WHERE key = 'k3'").fetchone()[0] == 0
        reader.close()
    finally:
        cache.close()
    plain = sqlite3.connect(tmp_path / "plain.sqlite")  # a cache of the former layout, read as a merge reads shards
    plain.execute(OLD_SCHEMA)
    plain.execute("INSERT INTO completions VALUES ('k1', 'no', 3, 1, NULL, 'm', 1.0)")
    assert list(read_entries(plain)) == [("k1", CachedCompletion("no", 3, 1, None, "m", 1.0))]
    plain.close()


def test_recorded_logprobs_replay_offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUDGE_KEY", "sk-fake-tape-key-5512")
    request = ask(REPLY, task="criteria", params={"temperature": 0, "logprobs": True, "top_logprobs": 20})

    def run(cfg: JudgeConfig) -> Any:
        async def main() -> Any:
            async with open_taped_judge(cfg, base_dir=tmp_path) as judge:
                return await outcome(judge, request)
        return asyncio.run(main())

    with ScriptedServer([Reply(200, _logprob_body())]) as server:
        recorded = run(JudgeConfig(model="test-model", base_url=server.base_url, api_key_env="JUDGE_KEY",
                                   record="tape.jsonl", **FAST))
    replayed = run(JudgeConfig(model="test-model", replay="tape.jsonl", **FAST))
    grade = dict(replayed.logprobs)["4"]
    assert [(t, round(math.exp(lp), 6)) for t, lp in grade] == GRADE_TOP
    assert replayed.logprobs == recorded.logprobs and len(replayed.logprobs) == len(TOKENS)


def test_the_reply_reader_takes_logprobs_whole_or_not_at_all() -> None:
    judgment = classify_body(_logprob_body())
    assert judgment.logprobs is not None and [t for t, _ in judgment.logprobs] == TOKENS  # type: ignore[union-attr]
    choice = {"logprobs": {"content": [{"token": "a", "top_logprobs": [
        {"token": "a", "logprob": -0.5}, {"token": "b", "logprob": float("nan")}, {"token": "c", "logprob": True},
        {"token": 7, "logprob": -1.0}, {"token": "d", "logprob": -2}]}]}}
    (token, alternatives), = read_logprobs(choice)  # type: ignore[misc]
    assert token == "a" and [t for t, _ in alternatives] == ["a", "b", "d"]  # what is not a number left out
    assert alternatives[0][1] == -0.5 and math.isnan(alternatives[1][1]) and alternatives[2][1] == -2.0
    huge = {"logprobs": {"content": [{"token": "a", "top_logprobs": [{"token": "a", "logprob": 10**400}]}]}}
    assert read_logprobs(huge) == (("a", (("a", math.inf),)),)  # kept, for the metric to refuse
    for broken in ({"logprobs": None}, {}, {"logprobs": {"content": []}}, {"logprobs": {"content": "x"}},
                   {"logprobs": {"content": [{"token": "a"}, {"token": None}]}}, {"logprobs": {"content": [3]}}):
        assert read_logprobs(broken) is None, broken


def _with_grade_logprob(logprob: float, *, tokens: list[str] | None = None) -> dict[str, Any]:
    """The worked example's reply whose grade position carries ``logprob`` for "4" (the rest as before)."""
    body = _logprob_body()
    content = body["choices"][0]["logprobs"]["content"]
    grade = TOKENS.index("4")
    content[grade]["top_logprobs"][1]["logprob"] = logprob
    if tokens is not None:
        for item, token in zip(content, tokens):
            item["token"] = token
    return body


@pytest.mark.parametrize(("logprob", "said"), [
    (1000.0, "label (a log-probability above 0 (1000 for '4': a probability above 1) where the grade is written)"),
    (float("nan"), "label (a log-probability that is not a finite number (nan for '4') where the grade is written)"),
    (float("inf"), "label (a log-probability that is not a finite number (inf for '4') where the grade is written)"),
    (0.5, "label (a log-probability above 0 (0.5 for '4': a probability above 1) where the grade is written)"),
])
def test_log_probabilities_that_are_no_probabilities_give_the_written_grade_and_say_why(
        tmp_path: Path, logprob: float, said: str) -> None:
    """1000 would overflow exp(); NaN would weigh nothing silently: neither weighs the grade, nothing crashes."""
    with ScriptedServer(default=Reply(200, _with_grade_logprob(logprob))) as server:
        value, row, _ = _evaluate(_config(server), tmp_path)
    assert (value, row["grade"], row["scoring"], "weighted_grade" in row) == (0.75, 4, said, False)  # (4 - 1) / 4


def test_tokens_that_do_not_spell_the_written_reply_give_the_written_grade(tmp_path: Path) -> None:
    """The log-probabilities of another text (here the grade token says "5" while the reply wrote 4) weigh
    nothing."""
    other = [("5" if token == "4" else token) for token in TOKENS]
    with ScriptedServer(default=Reply(200, _with_grade_logprob(math.log(0.3), tokens=other))) as server:
        value, row, _ = _evaluate(_config(server), tmp_path)
    assert (value, row["scoring"]) == (0.75, "label (the log-probabilities' tokens do not spell the written reply)")


def test_a_log_probability_rounded_just_above_0_still_weighs() -> None:
    from open_rag_eval.scoring.criteria import SCALES, weighted_grade

    assert weighted_grade(SCALES["1-5"], [("4", 0.00001), ("3", -50.0)]) == pytest.approx(4.0, abs=1e-12)
    with pytest.raises(ValueError, match="above 0"):
        weighted_grade(SCALES["1-5"], [("4", 0.01)])
