"""Tracking from the Python API (``evaluate(..., tracking=...)`` and a config's ``tracking:`` section) and from
sweeps (one run per sweep, named by system and sweep id, the verdict as a tag and metrics), against a real local
MLflow store (SQLite backend) and the loopback Opik fake."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.core.errors import MissingDependency
from open_rag_eval.tracking import TrackingError, TrackingOptions
from tests.opik_server import OpikServer
from tests.rag_server import RagBehaviour, RagServer
from tests.test_sweep import sweep_config

DATA = [{"query_id": "q1", "question": "Where is the Eiffel Tower?", "answer": "It is in Paris [1].",
         "contexts": ["The Eiffel Tower stands on the Champ de Mars in Paris."],
         "reference_answer": "In Paris.", "expected_refusal": False},
        {"query_id": "q2", "question": "Who wrote the first computer program?", "answer": "Ada Lovelace [1].",
         "contexts": ["Ada Lovelace published the first algorithm meant for a machine in 1843."]}]
JUDGE = {"simulated": {"seed": 1}, "cache": False}


def _mlflow():
    return pytest.importorskip("mlflow", reason="mlflow is not installed (pip install -e '.[mlflow]')")


@pytest.fixture(autouse=True)
def _no_telemetry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")


def _runs(uri: str, experiment: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    return client.search_runs([client.get_experiment_by_name(experiment).experiment_id])


def test_evaluate_with_tracking_logs_the_run_to_mlflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _mlflow()
    pytest.importorskip("pandas", reason="pandas (the 'api' extra) is not installed")
    from open_rag_eval import evaluate

    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = evaluate(DATA, judge=JUDGE, tracking={"experiment": "api", "tracking_uri": uri, "tags": {"t": "1"}})
    (run,) = _runs(uri, "api")
    assert results.tracked_run == run.info.run_id and run.info.status == "FINISHED"
    assert run.info.run_name.startswith("evaluate-")  # no output folder: named by the time
    assert run.data.params["config_digest"] == results.manifest["config_digest"]
    assert run.data.metrics["citation.f1"] == pytest.approx(results.mean("citation.f1"))
    assert run.data.tags["t"] == "1"
    assert not list(tmp_path.glob("open-rag-eval-*"))  # the temporary results folder is gone


def test_a_config_files_tracking_section_is_honoured_inside_a_running_loop(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _mlflow()
    from open_rag_eval import aevaluate, evaluate

    monkeypatch.chdir(tmp_path)
    (tmp_path / "eval.yaml").write_text("judge:\n  simulated: {seed: 1}\n  cache: false\ntracking:\n"
                                        "  experiment: from-config\n  tracking_uri: sqlite:///mlflow.db\n",
                                        encoding="utf-8")

    async def notebook() -> tuple:
        first = evaluate(DATA, "eval.yaml", output_dir="results/one")  # sync call inside a running loop
        second = await aevaluate(DATA, "eval.yaml", output_dir="results/two")
        return first, second

    first, second = asyncio.run(notebook())
    runs = {run.info.run_name: run for run in _runs(f"sqlite:///{tmp_path / 'mlflow.db'}", "from-config")}
    assert set(runs) == {"one", "two"}  # named by their output folders
    assert runs["one"].info.run_id == first.tracked_run and runs["two"].info.run_id == second.tracked_run


def test_evaluate_with_opik_tracking_and_the_short_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval import evaluate

    monkeypatch.chdir(tmp_path)
    with OpikServer() as server:
        results = evaluate(DATA, judge=JUDGE, output_dir="results/opik",
                           tracking=TrackingOptions(backend="opik", tracking_uri=server.url, dataset="api-queries"))
        (experiment,) = server.experiments.values()
        assert results.tracked_run == experiment["id"] and experiment["name"] == "opik"
        data = {item["data"]["query_id"]: item["data"] for item in server.items["api-queries"].values()}
        assert set(data) == {"q1", "q2"}
        assert data["q1"]["reference_answer"] == "In Paris." and data["q1"]["expected_refusal"] is False
        assert "reference_answer" not in data["q2"]  # no label: nothing made up
        assert len(server.experiment_items) == 2
    monkeypatch.setitem(sys.modules, "mlflow", None)  # tracking="mlflow" with mlflow missing: before any work
    with pytest.raises(MissingDependency):
        evaluate(DATA, judge=JUDGE, output_dir="results/never", tracking="mlflow")
    assert not (tmp_path / "results" / "never").exists()


def test_a_tracking_failure_in_evaluate_raises_with_the_results(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval import evaluate

    monkeypatch.chdir(tmp_path)
    with OpikServer() as server:
        server.fail["POST /experiments"] = [500, 500]
        with pytest.raises(TrackingError, match="HTTP 500") as caught:
            evaluate(DATA, judge=JUDGE, output_dir="results/kept",
                     tracking={"backend": "opik", "tracking_uri": server.url, "retries": 1})
    results = caught.value.results
    assert results is not None and results.mean("citation.f1") is not None  # nothing judged is lost
    assert (tmp_path / "results" / "kept" / "results.csv").is_file()


def test_each_sweep_logs_a_run_with_its_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _mlflow()
    monkeypatch.chdir(tmp_path)  # MLflow puts a SQLite store's artifacts under ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with RagServer() as rag:
        config = sweep_config(tmp_path, rag.url, queries=4)
        with config.open("a", encoding="utf-8") as handle:
            handle.write(f"tracking:\n  experiment: sweeps\n  tracking_uri: {uri}\n")
        assert main(["sweep", "--config", str(config)]) == 0
        assert main(["sweep", "--config", str(config)]) == 0
        rag.behaviour = RagBehaviour(mode="unstable")
        assert main(["sweep", "--config", str(config)]) in (1, 7)  # 4 queries: a regression or inconclusive
    runs = sorted(_runs(uri, "sweeps"), key=lambda run: run.info.start_time)
    assert len(runs) == 3
    verdicts = [run.data.tags["open_rag_eval.sweep_verdict"] for run in runs]
    assert verdicts[:2] == ["first", "stable"] and verdicts[2] in ("regression", "inconclusive")
    for run in runs:
        sweep_id = run.data.tags["open_rag_eval.sweep_id"]
        assert run.info.run_name == f"demo-{sweep_id}" and run.data.tags["open_rag_eval.sweep_system"] == "demo"
        assert (tmp_path / "out" / "sweeps" / sweep_id / "results.csv").is_file()
    assert runs[1].data.tags["open_rag_eval.sweep_baseline"] == runs[0].data.tags["open_rag_eval.sweep_id"]
    assert [run.data.metrics["sweep.verdict_exit_code"] for run in runs[:2]] == [0, 0]
    assert runs[2].data.metrics["sweep.verdict_exit_code"] in (1, 7)
    assert runs[2].data.metrics["sweep.regressions"] + runs[2].data.metrics["sweep.inconclusive"] >= 1
    assert "consistency.rougeL" in runs[2].data.metrics


def test_a_sweep_to_opik_and_a_tracking_failure_after_a_stable_sweep_is_exit_5(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with RagServer() as rag, OpikServer() as opik:
        config = sweep_config(tmp_path, rag.url, queries=4)
        with config.open("a", encoding="utf-8") as handle:
            handle.write(f"tracking:\n  tracking_uri: {opik.url}\n  retries: 0\n")
        assert main(["sweep", "--config", str(config), "--track", "opik"]) == 0
        (experiment,) = opik.experiments.values()
        assert experiment["name"].startswith("demo-") and "open_rag_eval.sweep_verdict=first" in experiment["tags"]
        scores = {score["name"]: score["value"] for score in experiment["experiment_scores"]}
        assert scores["sweep.verdict_exit_code"] == 0
        opik.fail["PUT /datasets/items"] = [503]
        assert main(["sweep", "--config", str(config), "--track", "opik"]) == 5  # stable, but not tracked
    assert any("tracking the run to opik" in r.getMessage() for r in caplog.records if r.levelname == "ERROR")
    folders = sorted((tmp_path / "out" / "sweeps").iterdir())
    assert len(folders) == 2 and all((folder / "results.csv").is_file() for folder in folders)
    assert json.loads((folders[1] / "manifest.json").read_text(encoding="utf-8"))
