"""Log a RunRecord to MLflow through ``MlflowClient`` (no global active run: safe inside a user's own MLflow code)."""

from __future__ import annotations

import os
import posixpath
import time
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import MissingDependency
from open_rag_eval.tracking.options import TrackingOptions
from open_rag_eval.tracking.record import RunRecord

__all__ = ["log_run", "require_mlflow"]

_PARAMS_PER_BATCH, _METRICS_PER_BATCH = 100, 1000  # MLflow's log_batch limits


def require_mlflow() -> Any:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # an offline tool: no usage pings from the client
    try:
        import mlflow
    except ImportError:
        raise MissingDependency("mlflow", "mlflow") from None
    return mlflow


def log_run(record: RunRecord, options: TrackingOptions) -> str:
    require_mlflow()
    from mlflow import MlflowClient
    from mlflow.entities import Metric, Param, RunTag

    client = MlflowClient(tracking_uri=absolute_sqlite(options.tracking_uri))
    experiment = client.get_experiment_by_name(options.experiment)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(options.experiment)
    tags = {**record.tags, **options.tags}
    run = client.create_run(experiment_id, run_name=options.run_name or record.output_dir.name, tags=tags)
    run_id = run.info.run_id
    try:
        params = [Param(key, value) for key, value in record.params.items()]
        now = int(time.time() * 1000)
        metrics = [Metric(key, value, now, 0) for key, value in record.metrics.items()]
        for i in range(0, len(params), _PARAMS_PER_BATCH):
            client.log_batch(run_id, params=params[i:i + _PARAMS_PER_BATCH])
        for i in range(0, len(metrics), _METRICS_PER_BATCH):
            client.log_batch(run_id, metrics=metrics[i:i + _METRICS_PER_BATCH])
        client.log_batch(run_id, tags=[RunTag("open_rag_eval.metrics_without_value", str(len(record.without_value)))])
        client.log_dict(run_id, {"metrics": record.names, "without_value": record.without_value},
                        "metric_names.json")
        for name, path in record.artifacts.items():  # a report page goes into the artifact folder report-queries/
            client.log_artifact(run_id, str(path), artifact_path=posixpath.dirname(name) or None)
        _log_table(client, run_id, record)
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    client.set_terminated(run_id, "FINISHED")
    return run_id


def absolute_sqlite(uri: str | None) -> str | None:
    """A relative ``sqlite:///mlflow.db`` made absolute against the current folder (what it means anyway): MLflow
    caches one store per URI string, so a relative one would keep writing to the first folder it was used in."""
    if uri is None or not uri.startswith("sqlite:///") or uri.startswith("sqlite:////") or ":memory:" in uri:
        return uri
    return f"sqlite:///{Path.cwd() / uri[len('sqlite:///'):]}"


def _log_table(client: Any, run_id: str, record: RunRecord) -> None:
    """results.csv as an MLflow table (shown in the UI's evaluation view) when pandas is there; the CSV file itself
    is always an artifact."""
    path = record.output_dir / "results.csv"
    try:
        import pandas
    except ImportError:
        return
    if path.is_file():
        from open_rag_eval.store.csv_cells import read_cell

        frame = pandas.read_csv(path)  # numbers stay numbers; an empty cell is a missing value, never 0
        for column in frame.columns[frame.dtypes == object]:
            frame[column] = frame[column].map(lambda cell: read_cell(cell) if isinstance(cell, str) else cell)
        client.log_table(run_id, frame, "per_query.json")
