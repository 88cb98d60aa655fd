"""What guards the result never endangers it: a failed control call is a failed control, a failure tied to one
request's content is a failed judgment, and neither is an outage (docs/judge-health.md, docs/reliability.md).

Real loopback servers that misbehave: one that answers only the run's own requests (500 for any other body, as a
replay judge that knows only the run's items), one that answers one body with 400, one that 500s on some bodies
while it answers the others.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.health.check import INCONCLUSIVE
from open_rag_eval.judge.base import guard_calls
from open_rag_eval.judge.client import OpenAIJudge
from tests.openai_server import Reply, ScriptedServer, ask, config, outcome, with_judge

DEMO = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"


def _key(body: dict[str, Any]) -> str:
    return json.dumps(body.get("messages"), sort_keys=True)


def _varied(body: dict[str, Any]) -> Reply:
    """A judge that is not constant: each task's label drawn from the request's digest (the same body, the same
    label)."""
    user = body["messages"][-1]["content"]
    pick = int(hashlib.sha256(_key(body).encode()).hexdigest(), 16)
    if "Statement:" in user:
        return Reply.ok(("Full Support", "Partial Support", "No Support")[pick % 3])
    if "score on an integer scale of 0 to 3" in user:
        return Reply.ok(f"##final score: {pick % 4}")
    if "attempt to answer the query" in user:
        return Reply.ok(("yes", "no")[pick % 2])
    return Reply.error(400, "not a task of this test")


def _write(tmp_path: Path, base_url: str, *, controls: bool, out: str = "out", extra: str = "") -> Path:
    config_file = tmp_path / f"{out}.yaml"
    config_file.write_text(
        f"input: {DEMO}\noutput_dir: {out}\njudge:\n  model: scripted\n  base_url: {base_url}\n  cache: false\n"
        f"  backoff_base_s: 0.001\n  backoff_cap_s: 0.002\n  outage_after_failures: 3\n{extra}"
        f"  health:\n    controls: {str(controls).lower()}\nevaluators:\n  - type: trec\n"
        "    metrics: [umbrela, citation, no_answer]\n", encoding="utf-8")
    return config_file


class RunOnly:
    """Answers the bodies a first run (controls off) sent, as ``_varied`` did; 500 for any other body."""

    def __init__(self, known: set[str]) -> None:
        self.known, self.refused = known, 0

    def __call__(self, body: dict[str, Any]) -> Reply:
        if _key(body) in self.known:
            return _varied(body)
        self.refused += 1
        return Reply.error(500, "this server knows only the run's own requests")


@pytest.fixture(scope="module")
def run_only(tmp_path_factory: pytest.TempPathFactory) -> RunOnly:
    tmp_path = tmp_path_factory.mktemp("first")
    with ScriptedServer(responder=_varied) as server:
        assert main(["-q", "eval", "--config", str(_write(tmp_path, server.base_url, controls=False))]) == 0
        return RunOnly({_key(seen.body) for seen in server.completions})


@pytest.mark.parametrize("strict", [True, False])
def test_a_judge_that_answers_only_the_run_s_own_items_writes_the_run(tmp_path: Path, run_only: RunOnly,
                                                                      strict: bool) -> None:
    """Every control call fails (HTTP 500 after 7 attempts each, 25 of them, more than the outage breaker's 3):
    the run is written whole, the controls are inconclusive naming the cause, and only --strict-judge exits 6."""
    with ScriptedServer(responder=run_only) as server:
        flags = ["--strict-judge"] if strict else []
        code = main(["-q", "eval", "--config", str(_write(tmp_path, server.base_url, controls=True)), *flags])
    assert code == (6 if strict else 0)
    assert run_only.refused >= 25 * 7  # every control item the run did not ask itself, 6 retries each
    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["complete"] is True
    controls = manifest["health"]["controls"]["tasks"]
    assert {task: (row["verdict"], row["calls_failed"], row["items"]) for task, row in controls.items()} == {
        "umbrela": (INCONCLUSIVE, 10, 10), "support": (INCONCLUSIVE, 10, 10),
        "no_answer": (INCONCLUSIVE, 5, 10)}  # a no-answer control's high item is the run's own request
    problems = manifest["health"]["problems"]
    assert [p.split(":")[0] for p in problems] == ["umbrela", "support", "no_answer"]
    assert "10 of 10 control calls failed" in problems[0] and "HTTP 500" in problems[0]
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert len(results["outputs"]) == 11 and all("umbrela.mean" in o["scores"] and not o["errors"] for o in results["outputs"])


def test_a_body_the_judge_refuses_with_400_is_one_failed_judgment(tmp_path: Path) -> None:
    """One passage's grading request gets HTTP 400 (as a content filter or a bad body would): that judgment is a
    missing value with the server's reason, every other judgment stands, and the run is complete."""
    def responder(body: dict[str, Any]) -> Reply:
        user = body["messages"][-1]["content"]
        if "score on an integer scale of 0 to 3" in user and "Moon's phases follow a cycle" in user:
            return Reply.error(400, "The response was filtered due to the prompt triggering the content policy",
                               code="content_filter")
        return _varied(body)

    with ScriptedServer(responder=responder) as server:
        code = main(["-q", "eval", "--config", str(_write(tmp_path, server.base_url, controls=False))])
    assert code == 0
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    grades = [g for o in results["outputs"] for g in o["details"]["umbrela"]["grades"]]
    failed = [g for g in grades if g["status"] == "failed"]
    assert {g["passage_id"] for g in failed} == {"4"}  # one judgment, the passage both runs of q1 retrieved
    assert all("HTTP 400" in g["reason"] and "content policy" in g["reason"] for g in failed)
    assert len(grades) > 20 and all(g["grade"] is not None for g in grades if g["status"] != "failed")


def test_a_body_that_keeps_failing_while_others_succeed_is_no_outage() -> None:
    """Three bodies get HTTP 500 on every attempt while others are answered: each is a failed judgment naming
    its content as the likely cause; the breaker (2 failures) does not trip and later calls still go out."""
    def responder(body: dict[str, Any]) -> Reply:
        text = body["messages"][-1]["content"]
        return Reply.error(500, "cannot process this body", delay_s=0.05) if "bad" in text else Reply.ok("2")

    async def body(judge: OpenAIJudge) -> list[Any]:
        found = await asyncio.gather(*(outcome(judge, ask(f"bad {i}")) for i in range(3)),
                                     *(outcome(judge, ask(f"good {i}")) for i in range(6)))
        return [*found, await outcome(judge, ask("good after"))]

    with ScriptedServer(responder=responder) as server:
        found = with_judge(config(server.base_url, max_retries=2, outage_after_failures=2), body)
    assert all(isinstance(f, JudgeCallError) and "content is the likely cause" in str(f) for f in found[:3])
    assert [f.text for f in found[3:]] == ["2"] * 7


def test_failed_control_calls_never_trip_the_outage_breaker() -> None:
    """Inside ``guard_calls`` (the controls) five calls fail with 500 against a breaker of 2: each is a failed
    call, the judge stays available, and the run's next call is answered."""
    def responder(body: dict[str, Any]) -> Reply:
        return Reply.error(500, "no") if "control" in body["messages"][-1]["content"] else Reply.ok("3")

    async def body(judge: OpenAIJudge) -> tuple[list[Any], Any]:
        with guard_calls():
            failed = [await outcome(judge, ask(f"control {i}")) for i in range(5)]
        return failed, await outcome(judge, ask("the run's own"))

    with ScriptedServer(responder=responder) as server:
        failed, after = with_judge(config(server.base_url, max_retries=1, outage_after_failures=2), body)
    assert all(isinstance(f, JudgeCallError) and "HTTP 500" in str(f) for f in failed)
    assert after.text == "3"


def test_the_same_failures_of_the_run_s_own_calls_are_an_outage() -> None:
    """The contrast: outside the guard, two calls failing with nothing answered trip the breaker."""
    from open_rag_eval.core.errors import JudgeUnavailable

    async def body(judge: OpenAIJudge) -> list[Any]:
        return [await outcome(judge, ask(f"call {i}")) for i in range(3)]

    with ScriptedServer(default=Reply.error(500, "down")) as server:
        found = with_judge(config(server.base_url, max_retries=1, outage_after_failures=2), body)
    assert isinstance(found[0], JudgeCallError) and not isinstance(found[0], JudgeUnavailable)
    assert isinstance(found[1], JudgeUnavailable) and isinstance(found[2], JudgeUnavailable)


@pytest.mark.parametrize(("record", "says"), [
    (True, "nothing judged was kept in the cache: judge.record turns the cache off"),
    (False, "everything judged so far is kept in the cache"),
])
def test_the_cache_line_is_said_only_when_true(tmp_path: Path, caplog: pytest.LogCaptureFixture, record: bool,
                                                says: str) -> None:
    extra = f"  record: {tmp_path / 'tape.jsonl'}\n" if record else ""
    config_file = _write(tmp_path, "", controls=False, extra=extra)
    with ScriptedServer(default=Reply.error(401, "bad key")) as server:
        text = config_file.read_text(encoding="utf-8").replace("base_url: \n", f"base_url: {server.base_url}\n")
        config_file.write_text(text.replace("cache: false", "cache: cache.sqlite"), encoding="utf-8")
        code = main(["-q", "eval", "--config", str(config_file)])
    assert code == 4
    assert says in caplog.text


def test_the_resume_line_of_a_refused_form_says_to_set_it_first() -> None:
    from open_rag_eval.cli import error_line
    from open_rag_eval.core.errors import JudgeUnavailable

    refused = JudgeUnavailable("the judge endpoint does not take response_format {...} (HTTP 500: x); set "
                               "judge.structured: json_object (...)")
    assert error_line(refused).endswith("(everything judged so far is kept in the cache; once that is set, re-run the "
                                        "same command to resume)")
    assert error_line(JudgeUnavailable("10 judge calls failed within 3s")).endswith(
        "(everything judged so far is kept in the cache; re-run the same command to resume)")
