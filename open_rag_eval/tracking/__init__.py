"""Experiment tracking: log a finished run's results folder to MLflow.

``track(output_dir, options)`` reads the files a run wrote (manifest.json, summary.csv, results.csv, report.html) and
logs them: params (config digest, judge model, prompt hashes, evaluator names), aggregate metrics (mean and 95% CI
bounds per summary row), the per-query table and the files as artifacts. The backend package is imported only here,
only when tracking is asked for; ``open-rag-eval --help`` never imports it. See docs/tracking.md.
"""

from __future__ import annotations

from pathlib import Path

from open_rag_eval.tracking.options import TrackingOptions

__all__ = ["TrackingError", "TrackingOptions", "check_available", "track"]


class TrackingError(Exception):
    """Logging to the tracking backend failed; the results folder is untouched."""


def check_available(options: TrackingOptions) -> None:
    """Raise MissingDependency (exit 2) before any work when the backend's package is not installed."""
    from open_rag_eval.tracking.mlflow_backend import require_mlflow

    require_mlflow()


def track(output_dir: Path, options: TrackingOptions) -> str:
    """Log the run in ``output_dir``; return the backend's run id. Any failure becomes one ``TrackingError``."""
    from open_rag_eval.errors import MissingDependency
    from open_rag_eval.tracking.mlflow_backend import log_run
    from open_rag_eval.tracking.record import read_record

    try:
        return log_run(read_record(Path(output_dir)), options)
    except MissingDependency:
        raise
    except Exception as error:  # the backend's own exceptions (HTTP, SQL, file) all mean one thing here
        raise TrackingError(f"{type(error).__name__}: {error}") from error
