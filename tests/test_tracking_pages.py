"""Tracking a run of more than ``INLINE_QUERIES`` queries logs the report's pages beside report.html: the MLflow
artifact folder ``report-queries/`` (a real local store) and Opik attachments named by their place in the folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from open_rag_eval.run.generation import PAGES_DIR
from open_rag_eval.tracking import TrackingOptions, track
from tests.opik_server import OpikServer
from tests.report_links import broken_links, large_items, tree

JUDGE = {"simulated": {"seed": 1}, "cache": False}


@pytest.fixture(scope="module")
def large_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The results folder of a run whose report has pages (written by ``evaluate``, nothing tracked yet)."""
    pytest.importorskip("pandas", reason="pandas (the 'api' extra) is not installed")
    from open_rag_eval import evaluate

    folder = tmp_path_factory.mktemp("large") / "out"
    evaluate(large_items(), judge=JUDGE, output_dir=folder)
    assert sorted((folder / PAGES_DIR).glob("page-*.html")), "the run is not large enough to have pages"
    return folder


def test_mlflow_logs_the_report_pages_as_an_artifact_folder(large_run: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mlflow", reason="mlflow is not installed (pip install -e '.[mlflow]')")
    from mlflow import MlflowClient

    monkeypatch.chdir(tmp_path)  # MLflow puts a SQLite store's artifacts under ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_id = track(large_run, TrackingOptions(backend="mlflow", tracking_uri=uri, experiment="pages"))
    client = MlflowClient(tracking_uri=uri)
    pages = {item.path for item in client.list_artifacts(run_id, PAGES_DIR)}
    assert pages == {name for name in tree(large_run) if name.startswith(f"{PAGES_DIR}/")}
    down = Path(client.download_artifacts(run_id, "", str(tmp_path / "down")))
    for name in ("report.html", *pages):
        assert (down / name).read_bytes() == (large_run / name).read_bytes(), name
    assert broken_links(down / "report.html") == []  # the logged report opens with its pages


def test_opik_attaches_the_report_pages_to_the_run_trace(large_run: Path) -> None:
    with OpikServer() as server:
        track(large_run, TrackingOptions(backend="opik", tracking_uri=server.url, experiment="pages"))
    by_trace: dict[str, dict[str, bytes]] = {}
    for (trace, name), data in server.attachments.items():
        by_trace.setdefault(trace, {})[name] = data
    (attached,) = by_trace.values()  # all on the one run trace
    expected = {name for name in tree(large_run) if name == "report.html" or name.startswith(f"{PAGES_DIR}/")}
    assert expected <= set(attached)
    for name in expected:
        assert attached[name] == (large_run / name).read_bytes(), name
