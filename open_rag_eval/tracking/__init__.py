"""Experiment tracking: log a finished run's results folder to MLflow or Opik.

``track(output_dir, options)`` reads the files a run wrote (manifest.json, results.json, summary.csv, results.csv,
report.html) and logs them: params (config digest, judge model, prompt hashes, evaluator names), aggregate metrics
(mean and 95% CI bounds per summary row), the per-query table and the files as artifacts -- for Opik also the
queries as a dataset and one experiment item per output. The backend is imported only here, only when tracking is
asked for; ``open-rag-eval --help`` never imports it. See docs/tracking.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from open_rag_eval.tracking.options import TrackingOptions

__all__ = ["TrackingError", "TrackingOptions", "check_available", "location", "track"]


class TrackingError(Exception):
    """Logging to the tracking backend failed; the results folder is untouched. Raised by ``evaluate``, it
    carries the run's ``results`` (else None)."""

    results: Any = None


def check_available(options: TrackingOptions) -> None:
    """Before any work: MissingDependency (exit 2) when the backend's package is not installed; ConfigError
    (exit 2) when the options cannot work (an Opik URL that is not HTTP)."""
    if options.backend == "opik":
        from open_rag_eval.tracking.opik_backend import opik_settings

        opik_settings(options)
        return
    from open_rag_eval.tracking.mlflow_backend import require_mlflow

    require_mlflow()


def location(options: TrackingOptions) -> str:
    """Where the run is logged, without credentials, for messages."""
    from open_rag_eval.core.redaction import redact, safe_url

    uri = options.tracking_uri
    if options.backend == "opik":
        from open_rag_eval.tracking.opik_backend import opik_settings

        uri = opik_settings(options)[0]
    if not uri:
        return "its default store"
    return safe_url(uri) if uri.startswith(("http://", "https://")) else redact(uri)


def track(output_dir: Path, options: TrackingOptions, *, metrics: dict[str, float] | None = None) -> str:
    """Log the run in ``output_dir``; return the backend's run id (Opik: the experiment id). ``metrics``: more
    run-level numbers to log with the aggregates (a sweep's verdict counts). Any failure becomes one
    ``TrackingError``."""
    from open_rag_eval.core.errors import ConfigError, MissingDependency
    from open_rag_eval.tracking.record import metric_key, read_record

    try:
        record = read_record(Path(output_dir))
        for name, value in (metrics or {}).items():
            record.metrics[metric_key(name)] = float(value)
            record.names[metric_key(name)] = name
        if options.backend == "opik":
            from open_rag_eval.tracking.opik_backend import log_run
        else:
            from open_rag_eval.tracking.mlflow_backend import log_run
        return log_run(record, options)
    except (MissingDependency, ConfigError):
        raise
    except Exception as error:  # the backend's own exceptions (HTTP, SQL, file) all mean one thing here
        raise TrackingError(f"{type(error).__name__}: {error}") from error
