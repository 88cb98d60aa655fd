"""Experiment tracking to MLflow: a real local tracking store (SQLite backend) read back through MlflowClient."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from open_rag_eval.tracking.record import metric_key
from tests.tracking_runs import run_eval, write_config

def _mlflow():
    return pytest.importorskip("mlflow", reason="mlflow is not installed (pip install -e '.[mlflow]')")


def _config(tmp_path: Path, tracking: str = "", metrics: str = "[umbrela, citation, no_answer, hhem]") -> Path:
    return write_config(tmp_path, tracking, metrics)


def _eval(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_eval(tmp_path, *extra)


def test_metric_keys_are_sanitised_without_collisions() -> None:
    assert metric_key("umbrela.ndcg@5") == "umbrela.ndcg_at_5"
    assert metric_key("golden.recall_all@10") == "golden.recall_all_at_10"
    assert metric_key("health.support.clean_rate") == "health.support.clean_rate"
    assert metric_key("a#b(c)") == "a_b_c_"
    assert metric_key("umbrela.p@1") != metric_key("umbrela.p_1")


def test_eval_track_mlflow_logs_params_metrics_tables_and_artifacts(tmp_path: Path) -> None:
    _mlflow()
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _config(tmp_path, f"tracking:\n  experiment: rag-tests\n  run_name: first\n  tracking_uri: {uri}\n"
                      "  tags: {team: search}\n")
    done = _eval(tmp_path, "--track", "mlflow")
    assert done.returncode == 0, done.stderr
    assert "tracked: mlflow run" in done.stderr

    out = tmp_path / "out"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    summary = json.loads((out / "results.json").read_text(encoding="utf-8"))["summary"]
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("rag-tests")
    (run,) = client.search_runs([experiment.experiment_id])
    assert run.info.run_name == "first" and run.info.status == "FINISHED"
    assert run.data.tags["team"] == "search" and run.data.tags["open_rag_eval.simulated"] == "true"

    params = run.data.params
    assert params["config_digest"] == manifest["config_digest"]
    assert params["judge_model"] == manifest["judge"]["model"]
    assert params["evaluators"] == "trec"
    sent = set(manifest["prompts_sent"])  # the templates this run's requests used (umbrela, citation, no_answer)
    assert "support.trec2024" in sent and any(p.startswith("umbrela.") for p in sent)
    assert not any(p.startswith(("nuggets.", "generation.")) for p in sent)  # never asked in this run
    for prompt, digest in manifest["prompt_hashes"].items():  # params describe the run: no prompt it never sent
        assert params.get(metric_key(f"prompt.{prompt}")) == (digest if prompt in sent else None), prompt
    assert len(params) == 8 + len(sent)

    metrics = run.data.metrics
    with_value = [row for row in summary if row["mean"] is not None]
    assert len(with_value) > 10
    for row in with_value:
        key = metric_key(row["metric"])
        assert metrics[key] == pytest.approx(row["mean"])
        if row["ci95_low"] is not None:
            assert metrics[f"{key}/ci95_low"] == pytest.approx(row["ci95_low"])
            assert metrics[f"{key}/ci95_high"] == pytest.approx(row["ci95_high"])
    assert "umbrela.ndcg_at_5" in metrics or "umbrela.ndcg_at_3" in metrics  # '@' is not a valid MLflow name

    # HHEM has no weights here: a metric without a value is listed, never logged as a number
    without = {row["metric"]: row["status"] for row in summary if row["mean"] is None}
    assert without, "the fixture should have a metric without a value"
    assert not any(metric_key(name) in metrics for name in without)

    files = {item.path for item in client.list_artifacts(run.info.run_id)}
    assert {"results.csv", "summary.csv", "report.html", "manifest.json", "metric_names.json",
            "per_query.json"} <= files
    local = Path(client.download_artifacts(run.info.run_id, "results.csv", str(tmp_path / "down")))
    assert local.read_bytes() == (out / "results.csv").read_bytes()
    names = json.loads(Path(client.download_artifacts(run.info.run_id, "metric_names.json",
                                                       str(tmp_path / "down"))).read_text(encoding="utf-8"))
    assert names["without_value"] == without
    table = json.loads(Path(client.download_artifacts(run.info.run_id, "per_query.json",
                                                      str(tmp_path / "down"))).read_text(encoding="utf-8"))
    assert len(table["data"]) == len((out / "results.csv").read_text(encoding="utf-8").splitlines()) - 1


def test_a_second_run_lands_in_the_same_experiment(tmp_path: Path) -> None:
    _mlflow()
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _config(tmp_path, f"tracking:\n  tracking_uri: {uri}\n", metrics="[umbrela]")
    assert _eval(tmp_path).returncode == 0
    assert _eval(tmp_path, "--output-dir", "again").returncode == 0
    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name("open-rag-eval").experiment_id])
    assert sorted(run.info.run_name for run in runs) == ["again", "out"]


def test_a_tracking_failure_keeps_the_results_and_exits_5(tmp_path: Path) -> None:
    _mlflow()
    (tmp_path / "not-a-folder").write_text("a file where the store's folder should be", encoding="utf-8")
    _config(tmp_path, f"tracking:\n  tracking_uri: sqlite:///{tmp_path / 'not-a-folder' / 'mlflow.db'}\n",
            metrics="[umbrela]")
    done = _eval(tmp_path, "--track", "mlflow")
    assert done.returncode == 5, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "tracking the run to mlflow" in errors[0] and "results are written" in errors[0]
    assert "Traceback" not in done.stderr
    for name in ("results.csv", "summary.csv", "results.json", "manifest.json", "report.html"):
        assert (tmp_path / "out" / name).is_file()


def test_missing_mlflow_is_exit_2_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError, as when it is not installed
    config = _config(tmp_path, metrics="[umbrela]")
    assert main(["eval", "--config", str(config), "--track", "mlflow"]) == 2
    assert not (tmp_path / "out").exists()


def test_unknown_tracking_option_is_a_config_error(tmp_path: Path) -> None:
    _config(tmp_path, "tracking:\n  backend: wandb\n", metrics="[umbrela]")
    done = _eval(tmp_path)
    assert done.returncode == 2 and "tracking.backend" in done.stderr


def test_help_imports_no_tracking_backend() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import sys, open_rag_eval.cli as c; c._parser(); "
         "print(sorted(m for m in sys.modules if m.split('.')[0] == 'mlflow' or m.startswith('open_rag_eval.tracking')))"],
        capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _blocks(language: str) -> list[str]:
    import re

    text = (Path(__file__).resolve().parent.parent / "docs" / "tracking.md").read_text(encoding="utf-8")
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_docs_config_example_runs_from_the_command_line(tmp_path: Path) -> None:
    _mlflow()
    from mlflow import MlflowClient

    block = _blocks("yaml")[0]  # the MLflow config; the second is Opik's
    _config(tmp_path, block, metrics="[umbrela]")
    done = _eval(tmp_path)
    assert done.returncode == 0, done.stderr
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")  # the docs' relative URI, from cwd
    (run,) = client.search_runs([client.get_experiment_by_name("rag-nightly").experiment_id])
    assert run.info.run_name == "baseline" and run.data.tags["team"] == "search"


def test_docs_python_examples_run_verbatim(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    _mlflow()
    pytest.importorskip("pandas", reason="pandas (the 'api' extra) is not installed")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    namespace: dict[str, object] = {}
    for block in _blocks("python"):
        exec(compile(block, "docs/tracking.md", "exec"), namespace)  # noqa: S102 - our own documentation
    model, f1, low = capsys.readouterr().out.split()
    summary = json.loads((tmp_path / "results" / "notebook" / "results.json").read_text(encoding="utf-8"))["summary"]
    row = next(r for r in summary if r["metric"] == "citation.f1")
    assert (float(f1), float(low)) == (pytest.approx(row["mean"]), pytest.approx(row["ci95_low"]))
    assert model == json.loads((tmp_path / "results" / "notebook" / "manifest.json").read_text())["judge"]["model"]
