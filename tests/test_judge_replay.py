"""Record/replay judge: record against a real loopback OpenAI server, replay offline, misses fail with a reason."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.config import load_config_text
from open_rag_eval.core.errors import ConfigError, InputError, JudgeCallError, JudgeUnavailable
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.replay import open_taped_judge, read_tape, replay_key
from tests.openai_server import FAST, Reply, ScriptedServer, ask, outcome

SECRET = "sk-fake-RECORDER-MUST-NOT-WRITE-7731"


def _run(cfg: JudgeConfig, requests: list[Any], base_dir: Path) -> list[Any]:
    async def main() -> list[Any]:
        async with open_taped_judge(cfg, base_dir=base_dir) as judge:
            return [await outcome(judge, request) for request in requests]

    return asyncio.run(main())


def _record(tmp_path: Path, script: list[Reply], requests: list[Any], monkeypatch: pytest.MonkeyPatch,
            **overrides: Any) -> tuple[list[Any], ScriptedServer]:
    monkeypatch.setenv("JUDGE_KEY", SECRET)
    with ScriptedServer(script) as server:
        # a non-loopback-looking name would need a key; loopback takes one too, and we give it the fake key
        cfg = JudgeConfig(model="test-model", base_url=server.base_url, api_key_env="JUDGE_KEY",
                          record="tape.jsonl", **{**FAST, **overrides})
        results = _run(cfg, requests, tmp_path)
    return results, server


def _replay(tmp_path: Path, requests: list[Any], model: str = "test-model", **overrides: Any) -> list[Any]:
    cfg = JudgeConfig(model=model, replay="tape.jsonl", **{**FAST, **overrides})
    return _run(cfg, requests, tmp_path)


def test_recorded_requests_replay_offline_with_the_same_text_and_usage(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    requests = [ask("grade passage A"), ask("grade passage B", task="support", params={"temperature": 0})]
    script = [Reply.ok("##final score: 2", prompt_tokens=31, completion_tokens=5), Reply.ok("Full Support")]
    recorded, server = _record(tmp_path, script, requests, monkeypatch)
    assert [r.text for r in recorded] == ["##final score: 2", "Full Support"]
    assert server.completions[0].headers.get("authorization") == f"Bearer {SECRET}"  # the key was really sent

    replayed = _replay(tmp_path, requests)
    assert [(r.text, r.prompt_tokens, r.completion_tokens) for r in replayed] == [
        ("##final score: 2", 31, 5), ("Full Support", 10, 2)]

    lines = [json.loads(line) for line in (tmp_path / "tape.jsonl").read_text().splitlines()]
    assert [(line["task"], line["status"], line["usage"]["prompt_tokens"]) for line in lines] == [
        ("umbrela", 200, 31), ("support", 200, 10)]
    assert lines[1]["request"]["params"] == {"temperature": 0}
    assert lines[0]["key"] == replay_key(model="test-model", messages=requests[0].messages, params={},
                                         prompt_version="", sample=0)


def test_the_recorder_never_writes_the_key_or_an_auth_header(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # the server even echoes the key back in an error body: the recorder masks it
    script = [Reply.error(400, f"bad request from key {SECRET}"), Reply.ok("1")]
    _record(tmp_path, script, [ask("one"), ask("two")], monkeypatch)
    text = (tmp_path / "tape.jsonl").read_text()
    assert len(text.splitlines()) == 2
    assert SECRET not in text and SECRET[-8:] not in text
    assert "authorization" not in text.lower() and "bearer" not in text.lower()
    assert "***" in text


def test_a_request_not_in_the_file_is_a_failure_with_the_reason(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _record(tmp_path, [Reply.ok("3")], [ask("recorded")], monkeypatch)
    [hit, miss] = _replay(tmp_path, [ask("recorded"), ask("never recorded")])
    assert hit.text == "3"
    assert isinstance(miss, JudgeCallError)
    assert "holds no recorded reply for this umbrela request" in str(miss) and "tape.jsonl" in str(miss)

    [other_model] = _replay(tmp_path, [ask("recorded")], model="another-model")
    assert isinstance(other_model, JudgeCallError)
    assert "recorded with judge.model 'test-model'" in str(other_model)


def test_params_are_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _record(tmp_path, [Reply.ok("3")], [ask("same text", params={"temperature": 0})], monkeypatch)
    [changed] = _replay(tmp_path, [ask("same text", params={"temperature": 0.7})])
    assert isinstance(changed, JudgeCallError) and "no recorded reply" in str(changed)
    [other_sample] = _replay(tmp_path, [ask("same text", params={"temperature": 0}, sample=1)])
    assert isinstance(other_sample, JudgeCallError)


def test_recorded_retries_replay_in_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    recorded, server = _record(tmp_path, [Reply.error(500, "overloaded"), Reply.ok("2")], [ask()], monkeypatch)
    assert recorded[0].text == "2" and len(server.completions) == 2
    assert [e.status for e in read_tape(tmp_path / "tape.jsonl")[_key()]] == [500, 200]
    [replayed] = _replay(tmp_path, [ask()])
    assert replayed.text == "2"


def test_a_recording_that_ends_in_a_failure_replays_as_that_failure(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    _record(tmp_path, [Reply.error(500, "overloaded")], [ask()], monkeypatch, max_retries=0)
    [replayed] = _replay(tmp_path, [ask()], max_retries=3)
    assert isinstance(replayed, JudgeCallError)
    assert "records 1 attempt(s)" in str(replayed)
    [refused] = _replay(tmp_path, [ask()], max_retries=0)  # the same retry budget: the recorded 500 itself
    assert isinstance(refused, JudgeCallError) and "HTTP 500: overloaded" in str(refused)


def test_a_recorded_refusal_replays_as_a_refusal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _record(tmp_path, [Reply.error(400, "content filtered")], [ask()], monkeypatch)
    [replayed] = _replay(tmp_path, [ask()])
    assert isinstance(replayed, JudgeCallError) and "HTTP 400: content filtered" in str(replayed)


def _key() -> str:
    return replay_key(model="test-model", messages=ask().messages, params={}, prompt_version="", sample=0)


@pytest.mark.parametrize(("line", "problem"), [
    ("not json", "not valid JSON"),
    ('["a list"]', "JSON object"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ('{"key": "k", "status": "200", "body": ""}', "status"),
    ('{"key": "k", "status": 200}', "body"),
])
def test_a_broken_replay_file_names_file_line_and_field(tmp_path: Path, line: str, problem: str) -> None:
    good = json.dumps({"key": "k", "status": 200, "body": "{}"})
    (tmp_path / "tape.jsonl").write_text(good + "\n" + line + "\n")
    with pytest.raises(InputError) as raised:
        read_tape(tmp_path / "tape.jsonl")
    assert problem in str(raised.value) and "tape.jsonl:2" in str(raised.value)


def test_replay_cannot_be_combined_with_the_simulated_judge_or_recording() -> None:
    for extra in ("  simulated: {}\n", "  record: out.jsonl\n"):
        with pytest.raises(ConfigError) as raised:
            load_config_text(f"judge:\n  replay: tape.jsonl\n{extra}evaluators:\n  - type: trec\n", base_dir=Path("."))
        assert "judge.replay" in str(raised.value)


_CONFIG = """
input: {input}
output_dir: {out}
judge:
  model: simulated-judge
{judge}
  cache: false
evaluators:
  - type: trec
    metrics: [umbrela, nuggets, citation, no_answer]
"""


def _eval(tmp_path: Path, name: str, judge: str) -> subprocess.CompletedProcess[str]:
    demo = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"
    config = tmp_path / f"{name}.yaml"
    config.write_text(_CONFIG.format(input=demo, out=tmp_path / name, judge=judge))
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config), "--limit", "2"],
                          capture_output=True, text=True, timeout=300)


def test_a_recorded_run_replays_through_the_cli_to_the_same_results(tmp_path: Path) -> None:
    recorded = _eval(tmp_path, "recorded", "  simulated: {noise_rate: 0.3, seed: 5}\n  record: tape.jsonl")
    assert recorded.returncode == 0, recorded.stderr
    replayed = _eval(tmp_path, "replayed", "  replay: tape.jsonl")
    assert replayed.returncode == 0, replayed.stderr
    assert (tmp_path / "recorded" / "results.csv").read_text() == (tmp_path / "replayed" / "results.csv").read_text()
    assert "SIMULATED JUDGE" in replayed.stdout + replayed.stderr  # a replayed simulated recording is still labelled simulated
    (tmp_path / "tape.jsonl").write_text("")  # an empty file answers nothing: every judged metric fails
    empty = _eval(tmp_path, "empty", "  replay: tape.jsonl")
    results = json.loads((tmp_path / "empty" / "results.json").read_text())
    errors = [e for o in results["outputs"] for e in o["errors"].values()]
    assert errors and all("no recorded reply" in e for e in errors), (empty.stderr, errors[:3])
    assert all(v is None or k.endswith(("n_failed", "n_invalid", "n_defaulted", "n_unparsed", "fabricated"))
               for o in results["outputs"] for k, v in o["scores"].items() if k.startswith("umbrela"))


def test_recording_is_bounded_like_a_live_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder's network transport has the live judge's bounds: a reply over max_reply_mb fails the call, and a
    redirect is refused (the endpoint is down for us), never followed."""
    huge = Reply.ok("##final score: 2 " + "x" * 1_500_000)
    [too_large] = _record(tmp_path, [huge], [ask("big")], monkeypatch, max_reply_mb=1)[0]
    assert isinstance(too_large, JudgeCallError) and "judge reply larger than 1 MB" in str(too_large)
    [moved], server = _record(tmp_path, [Reply.redirect("http://localhost:9/v1/chat/completions")], [ask("moved")],
                              monkeypatch)
    assert isinstance(moved, JudgeUnavailable) and "HTTP 307 redirect to http://localhost:9/" in str(moved)
    assert len(server.completions) == 1
