"""Experiment tracking to Opik through its REST API, against a loopback fake that records every call
(``tests/opik_server.py``; Opik's own server cannot run here): dataset sync, the experiment, one trace, feedback
scores and experiment item per output, the report attached; idempotent re-logging; failures are exit 5 with the
results kept; the API key comes from an environment variable and never shows in any output."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
import uuid
from datetime import datetime
from pathlib import Path

import pytest

from open_rag_eval.tracking import TrackingError, TrackingOptions, track
from open_rag_eval.tracking.opik_backend import stable_id
from tests.opik_server import OpikServer
from tests.tracking_runs import run_eval, write_config

KEY = "opik-test-key-0123456789abcdef"  # made up: the fake server's only accepted key


def _tracking(server: OpikServer, **extra: object) -> str:
    options = {"backend": "opik", "tracking_uri": server.url, "experiment": "rag-tests", "run_name": "first",
               "dataset": "rag-queries", "api_key_env": "OPIK_TEST_KEY", "tags": {"team": "search"}, **extra}
    return "tracking:\n" + "".join(f"  {key}: {json.dumps(value)}\n" for key, value in options.items())


def _env() -> dict[str, str]:
    return {**os.environ, "OPIK_TEST_KEY": KEY}


def _details(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


def test_stable_ids_are_uuid7_and_derived_from_their_parts() -> None:
    first = stable_id("item", "default", "rag-queries", "q1")
    assert uuid.UUID(first).version == 7 and uuid.UUID(first).variant == uuid.RFC_4122
    assert first == stable_id("item", "default", "rag-queries", "q1")
    assert first != stable_id("item", "default", "rag-queries", "q2")
    assert stable_id("a", "bc") != stable_id("ab", "c")


def test_eval_track_opik_logs_dataset_experiment_items_scores_and_report(tmp_path: Path) -> None:
    with OpikServer(api_key=KEY) as server:
        write_config(tmp_path, _tracking(server))
        done = run_eval(tmp_path, "--track", "opik", env=_env())
        assert done.returncode == 0, done.stderr
    assert "tracked: opik" in done.stderr
    out = tmp_path / "out"
    details = _details(out)
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))

    # every call: the key from the variable, the workspace; the order: dataset, experiment, traces, scores, links
    assert all(call["headers"].get("authorization") == KEY for call in server.calls)
    assert all(call["headers"].get("comet-workspace") == "default" for call in server.calls)
    paths = server.paths()
    assert paths[:4] == ["POST /datasets/retrieve", "POST /datasets", "PUT /datasets/items", "POST /experiments"]
    assert paths.index("POST /traces/batch") < paths.index("PUT /traces/feedback-scores") < paths.index(
        "POST /experiments/items")
    (experiment_id, experiment), = server.experiments.items()
    created = datetime.fromisoformat(manifest["created"])  # the run's time: the time part of its ids and traces
    assert uuid.UUID(experiment_id).bytes[:6] == int(created.timestamp() * 1000).to_bytes(6, "big")
    assert {trace["start_time"][:19] for trace in server.traces.values()} == {created.strftime("%Y-%m-%dT%H:%M:%S")}
    assert paths[-1] == f"PATCH /experiments/{experiment_id}" and experiment["status"] == "completed"

    # the dataset: one item per query
    queries = {o["query_id"]: o["query"] for o in details["outputs"]}
    items = server.items["rag-queries"]
    assert sorted(item["data"]["query_id"] for item in items.values()) == sorted(queries)
    assert all(item["data"]["query"] == queries[item["data"]["query_id"]] for item in items.values())

    # the experiment: params, tags, aggregates with CIs under the metrics' own names
    assert experiment["name"] == "first" and experiment["dataset_name"] == "rag-queries"
    assert experiment["project_name"] == "rag-tests" and "team=search" in experiment["tags"]
    params = experiment["metadata"]["params"]
    assert params["config_digest"] == manifest["config_digest"]
    assert params["judge_model"] == manifest["judge"]["model"]
    for prompt in manifest["prompts_sent"]:
        assert manifest["prompt_hashes"][prompt] in params.values(), prompt
    assert not any(key.startswith("prompt.generation") for key in params)  # a trec run sent no generation prompt
    aggregates = {score["name"]: score["value"] for score in experiment["experiment_scores"]}
    with_value = [row for row in details["summary"] if row["mean"] is not None]
    assert len(with_value) > 10
    for row in with_value:
        assert aggregates[row["metric"]] == pytest.approx(row["mean"])
        if row["ci95_low"] is not None:
            assert aggregates[f"{row['metric']}/ci95_low"] == pytest.approx(row["ci95_low"])
            assert aggregates[f"{row['metric']}/ci95_high"] == pytest.approx(row["ci95_high"])
    without = {row["metric"] for row in details["summary"] if row["mean"] is None}
    assert without and not without & set(aggregates)  # never a number for a metric without a value
    assert set(experiment["metadata"]["metrics_without_value"]) == without

    # per output: a trace (query in, answer out), its scores, an experiment item linking the dataset item
    links = list(server.experiment_items.values())
    assert len(links) == len(details["outputs"]) + sum(1 for q in details["queries"] if q.get("scores"))
    by_trace = {link["trace_id"]: link for link in links}
    for output in details["outputs"]:
        trace_id = stable_id("trace", experiment_id, output["query_id"], str(output["run"]), at=created)
        trace = server.traces[trace_id]
        assert trace["input"]["query"] == output["query"] and trace["output"]["answer"] == output["answer_text"]
        link = by_trace[trace_id]
        assert link["experiment_id"] == experiment_id
        assert items[link["dataset_item_id"]]["data"]["query_id"] == output["query_id"]
        for metric, value in output["scores"].items():
            if value is None:
                assert (trace_id, metric) not in server.scores
                assert metric in trace["metadata"]["metrics_without_value"]
            else:
                assert server.scores[(trace_id, metric)]["value"] == pytest.approx(value)

    # the run's files, byte for byte, attached to the run trace
    run_trace = stable_id("run-trace", experiment_id, at=created)
    for name in ("results.csv", "summary.csv", "report.html", "manifest.json"):
        assert server.attachments[(run_trace, name)] == (out / name).read_bytes()

    # the key never lands in an output or a log
    assert KEY not in done.stdout + done.stderr
    for path in out.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path.name


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One evaluated results folder, shared by the tests that log it with ``track()``."""
    folder = tmp_path_factory.mktemp("evaluated")
    write_config(folder, "")
    done = run_eval(folder)
    assert done.returncode == 0, done.stderr
    return folder / "out"


def test_logging_the_same_folder_again_upserts_the_same_ids(evaluated: Path) -> None:
    with OpikServer() as server:
        options = TrackingOptions(backend="opik", tracking_uri=server.url, experiment="rag", run_name="nightly")
        first = track(evaluated, options)
        sizes = (len(server.items["rag"]), len(server.traces), len(server.scores), len(server.experiment_items))
        assert min(sizes) > 0
        calls = len(server.calls)
        second = track(evaluated, options)
        assert second == first
        assert (len(server.items["rag"]), len(server.traces), len(server.scores),
                len(server.experiment_items)) == sizes
        again = server.paths()[calls:]
        assert "POST /datasets" not in again  # found by name this time
        assert again.count("POST /experiments") == 1  # answered 409: the same experiment, not a second one
        assert len(server.experiments) == 1 and server.experiments[first]["status"] == "completed"

        # another experiment (run name) over the same queries: the same dataset items, linked again
        third = track(evaluated, options.model_copy(update={"run_name": "nightly-2"}))
        assert third != first and len(server.experiments) == 2
        assert len(server.items["rag"]) == sizes[0]
        linked = {link["dataset_item_id"] for link in server.experiment_items.values()
                  if link["experiment_id"] == third}
        assert linked == set(server.items["rag"])


def _eval_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tracking: str) -> int:
    from open_rag_eval.cli import main

    monkeypatch.chdir(tmp_path)
    write_config(tmp_path, tracking, metrics="[umbrela]")
    return main(["eval", "--config", "eval.yaml"])


@pytest.mark.parametrize("fault", ["500", "timeout", "bad_body", "wrong_key", "no_server"])
def test_a_failing_opik_server_is_exit_5_and_keeps_the_results(tmp_path: Path, fault: str,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               caplog: pytest.LogCaptureFixture,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OPIK_TEST_KEY", KEY)
    with OpikServer(api_key=KEY) as server:
        if fault == "500":
            server.fail["POST /traces/batch"] = [500] * 5
        elif fault == "timeout":
            server.hang.add("POST /datasets/retrieve")
        elif fault == "bad_body":
            server.bad_body.add("POST /datasets/retrieve")
        elif fault == "wrong_key":
            monkeypatch.setenv("OPIK_TEST_KEY", "not-the-key-" + KEY[::-1])
        tracking = _tracking(server, retries=1, timeout_s=1.0)
        if fault == "no_server":
            server.__exit__()
        started = time.monotonic()
        code = _eval_in_process(tmp_path, monkeypatch, tracking)
    assert code == 5
    assert time.monotonic() - started < 60
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and "tracking the run to opik at http://127.0.0.1:" in errors[0], errors
    assert "the results are written to" in errors[0]
    expected = {"500": "HTTP 500", "timeout": "no reply", "bad_body": "not JSON", "wrong_key": "HTTP 401",
                "no_server": "no reply"}[fault]
    assert expected in errors[0]
    for name in ("results.csv", "summary.csv", "results.json", "manifest.json", "report.html"):
        assert (tmp_path / "out" / name).is_file()
    shown = capsys.readouterr()
    everything = shown.out + shown.err + caplog.text
    assert KEY not in everything and KEY[::-1] not in everything
    if fault == "500":
        (experiment,) = server.experiments.values()
        assert experiment["status"] == "failed"  # marked, like an MLflow run that could not finish
        assert server.paths().count("POST /traces/batch") == 2  # one retry, then the error


def test_one_transient_503_is_retried(evaluated: Path) -> None:
    with OpikServer() as server:
        server.fail["PUT /datasets/items"] = [503]
        track(evaluated, TrackingOptions(backend="opik", tracking_uri=server.url, api_key_env="NO_SUCH_VARIABLE"))
        assert server.paths().count("PUT /datasets/items") == 2
        assert all("authorization" not in call["headers"] for call in server.calls)  # no key set: none sent


def test_python_track_raises_tracking_error(evaluated: Path) -> None:
    with OpikServer() as server:
        server.fail["POST /datasets/retrieve"] = [400]
        with pytest.raises(TrackingError, match="HTTP 400"):
            track(evaluated, TrackingOptions(backend="opik", tracking_uri=server.url, retries=0))


def test_opik_url_must_be_http(tmp_path: Path) -> None:
    write_config(tmp_path, "tracking:\n  backend: opik\n  tracking_uri: sqlite:///opik.db\n")
    done = run_eval(tmp_path)
    assert done.returncode == 2 and "tracking.tracking_uri" in done.stderr


def test_help_imports_no_opik_client() -> None:
    done = subprocess.run([sys.executable, "-c", "import sys, open_rag_eval.cli as c; c._parser(); "
                           "print([m for m in sys.modules if 'opik' in m or m == 'httpx2'])"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
