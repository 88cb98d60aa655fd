"""Judge replies and numbers through the CLI: a reply the judge did not really give is never a grade, a run whose
judged metric failed everywhere says so (exit 6), usage and fingerprints are checked, bad numbers are refused."""

from __future__ import annotations

import csv
import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from open_rag_eval.cli import main
from open_rag_eval.judge.client import OpenAIJudge
from tests.openai_server import Reply, ScriptedServer, ask, config, outcome, with_judge
from tests.test_faults_api_errors import run_cli, synthetic_outputs, write_config, write_inputs

NULL = Reply.shaped({"role": "assistant", "content": None})


def _config(folder: Path, data: Path, judge: dict[str, Any], metrics: tuple[str, ...], name: str) -> Path:
    path = write_config(folder, data, {"cache": False, "model": "gpt-4o-mini", "backoff_base_s": 0.001,
                                       "backoff_cap_s": 0.002, **judge}, name=name)
    loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    loaded["evaluators"][0]["metrics"] = list(metrics)
    path.write_text(yaml.safe_dump(loaded), encoding="utf-8")
    return path


def _run(tmp_path: Path, server: ScriptedServer, judge: dict[str, Any] | None = None, n_queries: int = 3,
         metrics: tuple[str, ...] = ("umbrela",)) -> tuple[int, Path]:
    data = write_inputs(tmp_path, synthetic_outputs(n_queries))
    cfg = _config(tmp_path, data, {"base_url": server.base_url, **(judge or {})}, metrics, "config.yaml")
    out = tmp_path / "out"
    return run_cli(cfg, out), out


def _results(out: Path) -> dict[str, Any]:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def _grades(out: Path) -> list[dict[str, Any]]:
    return [g for o in _results(out)["outputs"] for g in o["details"]["umbrela"]["grades"]]


def test_a_judge_that_answers_null_everywhere_is_an_incomplete_run_exit_6(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with ScriptedServer(default=NULL) as server, caplog.at_level(logging.ERROR):
        code, out = _run(tmp_path, server, metrics=("umbrela", "nuggets", "citation", "no_answer"))
    assert code == 6
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].startswith("error: incomplete run: umbrela.mean, nuggets.vital_strict, nuggets.weighted, "
                                                  "citation.f1, no_answer.answered")
    assert "commonest reason:" in errors[0] and "empty reply from the judge (content null" in errors[0]
    # never a grade: every grade is missing with its reason, nothing averaged, nuggets not 0 "by convention"
    assert all(g["grade"] is None and g["status"] == "failed" for g in _grades(out))
    summary = {r["metric"]: r for r in csv.DictReader((out / "summary.csv").open(encoding="utf-8"))}
    for metric in ("umbrela.mean", "nuggets.vital", "nuggets.all", "citation.f1", "no_answer.answered"):
        assert (summary[metric]["mean"], summary[metric]["n"], summary[metric]["status"]) == ("", "0", "failed")
        assert summary[metric]["n_failed"] == "3"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["complete"] is False
    assert {"umbrela.mean", "nuggets.vital"} <= {item["metric"] for item in manifest["incomplete"]}
    assert manifest["accounting"]["total"]["failures"] == manifest["accounting"]["total"]["calls"] > 0
    rows = list(csv.DictReader((out / "results.csv").open(encoding="utf-8")))
    assert all("content null" in r["umbrela.mean.error"] for r in rows)
    report = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="incomplete"' in report and "failed, not unavailable" in report


def _filter_some(body: dict[str, Any]) -> Reply:
    """UMBRELA prompts about a passage with 'coal' are stopped by a content filter; every other prompt gets 3."""
    prompt = body["messages"][-1]["content"]
    if "Passage:" in prompt and "coal" in prompt.split("Passage:")[-1]:
        return Reply.shaped({"role": "assistant", "content": "##final score: 0"}, finish_reason="content_filter")
    return Reply.ok("##final score: 3")


def test_filtered_replies_are_missing_grades_counted_never_grade_0(tmp_path: Path) -> None:
    with ScriptedServer(responder=_filter_some) as server:
        code, out = _run(tmp_path, server, n_queries=6)
    assert code == 0  # a partial failure is no incomplete run
    grades = _grades(out)
    filtered = [g for g in grades if g["grade"] is None]
    assert filtered and all("content filter" in g["reason"] for g in filtered)
    assert {g["grade"] for g in grades if g["grade"] is not None} == {3}  # no 0 anywhere
    for output in _results(out)["outputs"]:
        n_failed = sum(1 for g in output["details"]["umbrela"]["grades"] if g["grade"] is None)
        assert output["scores"]["umbrela.n_failed"] == n_failed
        if n_failed:
            assert "content filter" in output["errors"]["umbrela.mean"]
        else:
            assert output["scores"]["umbrela.mean"] == 3.0


def _overflow_long(body: dict[str, Any]) -> Reply:
    prompt = body["messages"][-1]["content"]
    if len(prompt) > 3000:
        return Reply.error(400, "This model's maximum context length is 1024 tokens", code="context_length_exceeded")
    return Reply.ok("##final score: 2")


def test_context_overflow_is_a_failed_grade_and_context_tokens_skips_the_call(tmp_path: Path) -> None:
    outputs = synthetic_outputs(2)
    outputs[0]["passages"][0]["text"] = "energy " * 600  # one passage too long for the context
    data = write_inputs(tmp_path, outputs)
    with ScriptedServer(responder=_overflow_long) as server:
        for name, extra in (("plain", {}), ("budget", {"context_tokens": 1024})):
            cfg = _config(tmp_path, data, {"base_url": server.base_url, **extra}, ("umbrela",), f"{name}.yaml")
            before = len(server.completions)
            assert run_cli(cfg, tmp_path / name) == 0
            sent = [s for s in server.completions[before:] if len(s.body["messages"][-1]["content"]) > 3000]
            grade = _grades(tmp_path / name)[0]
            assert grade["grade"] is None and grade["status"] == "failed"
            if name == "plain":
                assert len(sent) == 1 and "does not fit the judge's context" in grade["reason"]
            else:
                assert sent == [] and "judge.context_tokens (1024)" in grade["reason"]


@pytest.mark.parametrize("limit", ["-1", "0", "two"])
def test_limit_must_be_a_positive_whole_number(tmp_path: Path, limit: str, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_inputs(tmp_path, synthetic_outputs(2))
    cfg = write_config(tmp_path, data, {"base_url": "http://127.0.0.1:9/v1"})
    with pytest.raises(SystemExit) as caught:
        main(["eval", "--config", str(cfg), "--limit", limit])
    assert caught.value.code == 2
    assert "--limit" in capsys.readouterr().err and not (tmp_path / "out").exists()


def test_a_priced_model_without_usage_costs_unknown_and_fingerprint_objects_are_ignored(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reply = Reply.shaped({"role": "assistant", "content": "##final score: 2"}, usage=None,
                         fingerprint={"fp_sim_": "x"})
    with ScriptedServer(default=reply) as server:
        code, out = _run(tmp_path, server)
    assert code == 0
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    total = manifest["accounting"]["total"]
    assert total["cost_usd"] is None and total["usage_unknown"] == total["calls"] > 0
    assert manifest["judge"]["fingerprints"] == [] and manifest["simulated"] is False
    assert f"cost unknown ({total['calls']} replies reported no valid token usage)" in capsys.readouterr().out


def test_a_real_endpoint_whose_fingerprint_starts_like_the_simulator_s_is_not_simulated(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply.ok("##final score: 2", fingerprint="fp_sim_0123456789")) as server:
        code, out = _run(tmp_path, server)
    assert code == 0
    assert json.loads((out / "manifest.json").read_text(encoding="utf-8"))["simulated"] is False
    assert _results(out)["simulated"] is False


# -- compare reads numbers back: finite only; a gate on a metric that does not exist is refused ----------------

def _results_csv(folder: Path, cell: str) -> Path:
    folder.mkdir()
    rows = [["query_id", "query", "run", "umbrela.mean", "simulated_judge"]]
    rows += [[f"q{i}", "q", "1", cell if i == 2 else "1.5", "false"] for i in range(4)]
    with (folder / "results.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return folder


@pytest.mark.parametrize("cell", ["inf", "-Infinity", "nan"])
def test_compare_refuses_non_finite_numbers_naming_file_line_and_column(
        tmp_path: Path, cell: str, caplog: pytest.LogCaptureFixture) -> None:
    a, b = _results_csv(tmp_path / "a", "1.0"), _results_csv(tmp_path / "b", cell)
    with caplog.at_level(logging.ERROR):
        code = main(["compare", str(a), str(b), "--output-dir", str(tmp_path), "--fail-if-worse", "umbrela.mean"])
    assert code == 3
    message = caplog.records[-1].getMessage()
    assert "b/results.csv:4: field 'umbrela.mean': not a finite number" in message
    assert not (tmp_path / "compare.csv").exists()


def test_compare_refuses_a_gate_on_a_metric_that_does_not_exist(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    a, b = _results_csv(tmp_path / "a", "1.0"), _results_csv(tmp_path / "b", "2.0")
    with caplog.at_level(logging.ERROR):
        code = main(["compare", str(a), str(b), "--output-dir", str(tmp_path), "--fail-if-worse", "umbrela.maen"])
    assert code == 3
    message = caplog.records[-1].getMessage()
    assert "no metric 'umbrela.maen' in A and B" in message and "did you mean umbrela.mean" in message
    with caplog.at_level(logging.ERROR):
        assert main(["compare", str(a), str(b), "--output-dir", str(tmp_path), "--fail-if-worse",
                     "umbrela.mean:inf"]) == 3
    assert "threshold must be a finite number" in caplog.records[-1].getMessage()


# -- timeouts lower the concurrency (a slow loopback server) ---------------------------------------------------

def _slow_then_fast(slow: int, delay_s: float, fast_first: int = 0) -> tuple[ScriptedServer, list[int]]:
    """After ``fast_first`` prompt replies, the next ``slow`` requests take ``delay_s`` (longer than the client waits);
    later ones answer at once. Records how many requests the server was working on as each one arrived (abandoned
    ones included)."""
    seen: list[int] = []
    holder: dict[str, ScriptedServer] = {}

    def respond(body: dict[str, Any]) -> Reply:
        server = holder["server"]
        seen.append(server.in_flight)
        return Reply.ok("2", delay_s=delay_s if fast_first < len(seen) <= fast_first + slow else 0.0)

    server = ScriptedServer(responder=respond)
    holder["server"] = server
    return server, seen


def test_timeouts_lower_the_concurrency_so_the_server_is_not_buried_in_abandoned_work() -> None:
    async def burst(judge: OpenAIJudge) -> list[Any]:
        import asyncio

        return list(await asyncio.gather(*(outcome(judge, ask(f"q{i}")) for i in range(24))))

    slow_replies = 40

    def run(adaptive: bool) -> tuple[list[Any], int, list[int], int]:
        # the endpoint answers once, then slows down: a timeout of an endpoint that never answered says nothing of
        # our load (it is down or drips) and keeps the concurrency (tests/acceptance/test_deadlines.py)
        server, seen = _slow_then_fast(slow=slow_replies, delay_s=1.5, fast_first=1)
        with server:
            # retries enough that no request runs out of them for other reasons than its timeouts
            cfg = config(server.base_url, max_concurrency=8, timeout_s=0.25, max_retries=slow_replies + 8,
                         adaptive_concurrency=adaptive)
            holder: dict[str, int] = {}

            async def body(judge: OpenAIJudge) -> list[Any]:
                assert (await outcome(judge, ask("first"))).text == "2"
                results = await burst(judge)
                holder["limit"] = judge.limiter.concurrency.limit
                return results

            results = with_judge(cfg, body)
            time.sleep(1.6)  # let the abandoned requests finish before the server closes
        return results, server.max_in_flight, seen, holder["limit"]

    adaptive, peak_adaptive, seen_adaptive, limit_after = run(True)
    fixed, peak_fixed, seen_fixed, _ = run(False)
    # a request meets at most three timeouts (0.25 s twice, then 0.5 s) before it fails saying so
    failed = [str(r) for r in adaptive + fixed if not hasattr(r, "text")]
    assert all(r.text == "2" for r in adaptive + fixed if hasattr(r, "text"))
    assert all("timed out 3 times (deadlines 0.25s, 0.25s, 0.5s)" in reason for reason in failed), failed
    # with the limit halved on timeouts, the server holds far fewer abandoned requests at once
    # the limit halves per wave of timeouts (8, 4, 2, 1): the server holds about 8 + 4 + 2 + 1 x (1.5 / 0.25)
    # abandoned requests at most, against 8 more every 0.25 s without adaptation (capped by the 40 slow ones)
    assert peak_fixed >= 24 and peak_adaptive <= 0.6 * peak_fixed
    assert limit_after < 8  # lowered (its recovery on successes: tests/test_judge_limits.py)


# -- the manifest records resolved numbers and defaults, never a string from the environment --------------------

def test_the_manifest_records_resolved_numbers_and_defaults_never_environment_strings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ORE_TEST_TIMEOUT", raising=False)
    monkeypatch.setenv("ORE_TEST_CONCURRENCY", "4")
    monkeypatch.setenv("ORE_TEST_USER", "private-user-77")
    monkeypatch.setenv("ORE_TEST_TOKEN", "12345678")
    with ScriptedServer(default=Reply.ok("##final score: 2")) as server:
        data = write_inputs(tmp_path, synthetic_outputs(1))
        cfg = _config(tmp_path, data, {"base_url": server.base_url, "timeout_s": "${ORE_TEST_TIMEOUT:-60}",
                                       "max_concurrency": "${ORE_TEST_CONCURRENCY}",
                                       "params": {"seed": "${ORE_TEST_UNSET_SEED:-7}", "user": "${ORE_TEST_USER}",
                                                  "user_token": "${ORE_TEST_TOKEN}"}}, ("umbrela",), "c.yaml")
        assert run_cli(cfg, tmp_path / "out") == 0
    text = (tmp_path / "out" / "manifest.json").read_text(encoding="utf-8")
    judge = json.loads(text)["config"]["judge"]
    assert (judge["timeout_s"], judge["max_concurrency"], judge["params"]["seed"]) == (60, 4, 7)
    assert judge["params"]["user"] == "${ORE_TEST_USER}" and "private-user-77" not in text
    assert judge["params"]["user_token"] == "${ORE_TEST_TOKEN}" and "12345678" not in text


@pytest.mark.parametrize("cell", ["Infinity", "-1e999"])
def test_compare_refuses_an_infinity_in_a_peer_trec_csv(tmp_path: Path, cell: str,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "peer.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows([["query_id", "query", "run_1_retrieval_score_mean_umbrela_score"],
                                      ["q1", "q", "1.5"], ["q2", "q", cell]])
    with caplog.at_level(logging.ERROR):
        assert main(["compare", str(path), str(path), "--output-dir", str(tmp_path)]) == 3
    message = caplog.records[-1].getMessage()
    assert "peer.csv:3: field 'run_1_retrieval_score_mean_umbrela_score': not a finite number" in message


def test_a_simulate_judge_server_named_as_base_url_is_still_labelled_simulated(tmp_path: Path) -> None:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer

    with SimulatedJudgeServer() as server:
        code, out = _run(tmp_path, server)  # type: ignore[arg-type]
    assert code == 0 and json.loads((out / "manifest.json").read_text(encoding="utf-8"))["simulated"] is True


def test_a_judge_failure_whose_server_says_unavailable_is_failed_not_unavailable() -> None:
    from open_rag_eval.core.missing import kind

    assert kind("grade of passage 3 failed: judge call failed after 7 attempts: HTTP 503: Service Unavailable") == \
        "failed"
    assert kind("nugget creation failed: window 1: judge call failed: HTTP 503: service unavailable") == "failed"
    assert kind("HHEM weights unavailable (not in the cache; looked for x)") == "unavailable"


def test_the_report_refuses_an_infinity_read_back_from_results_json_or_summary_csv(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with ScriptedServer(default=Reply.ok("##final score: 2")) as server:
        code, out = _run(tmp_path, server)
    assert code == 0
    results = (out / "results.json").read_text(encoding="utf-8")
    (out / "results.json").write_text(results.replace('"umbrela.mean": 2.0', '"umbrela.mean": Infinity', 1),
                                      encoding="utf-8")
    with caplog.at_level(logging.ERROR):
        assert main(["report", str(out)]) == 3
    assert "results.json: not a finite number: Infinity" in caplog.records[-1].getMessage()
    (out / "results.json").unlink()
    summary = list(csv.reader((out / "summary.csv").open(encoding="utf-8")))
    summary[1][summary[0].index("mean")] = "inf"
    with (out / "summary.csv").open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(summary)
    with caplog.at_level(logging.ERROR):
        assert main(["report", str(out)]) == 3
    assert "summary.csv:2: field 'mean': not a finite number" in caplog.records[-1].getMessage()


@pytest.mark.parametrize("metric", ["rubric", "rag_guide", "answer_relevance"])
def test_a_generation_metric_whose_every_judgment_fails_is_an_incomplete_run_exit_6(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, metric: str) -> None:
    # these families are judged (the metric catalogue says so): failed everywhere is no "complete" run
    data = write_inputs(tmp_path, synthetic_outputs(3))
    with ScriptedServer(default=NULL) as server, caplog.at_level(logging.ERROR):
        path = _config(tmp_path, data, {"base_url": server.base_url}, (), "config.yaml")
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        loaded["evaluators"] = [{"type": "generation", "metrics": [metric]}]
        path.write_text(yaml.safe_dump(loaded), encoding="utf-8")
        code = run_cli(path, tmp_path / "out")
    assert code == 6
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    failed = {item["metric"] for item in manifest["incomplete"]}
    assert manifest["complete"] is False and failed and all(m.startswith(f"{metric}.") for m in failed), failed
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    # no metric has any value here: the line says so first, then names the judged metric that failed everywhere
    assert len(errors) == 1 and errors[0].startswith(
        f"error: incomplete run: no metric has a value for any output: {metric}."), errors
