"""Log a RunRecord to Opik through its REST API (``opik_client``): dataset sync, an experiment, one trace and one
experiment item per output with its scores, and the run's files as attachments.

What goes where (docs/tracking.md):

- the **dataset** (``tracking.dataset``, default the ``experiment`` name) holds one item per query, ``{query_id,
  query}``; an item's id is derived from the dataset and the query id, so re-logging upserts the same items;
- the **experiment** (named ``run_name``, default the results folder's name) in the dataset: its metadata holds the
  params (config digest, judge model, prompt hashes...), tags and metric names; its ``experiment_scores`` the
  aggregates: ``<metric>`` (mean), ``<metric>/ci95_low``, ``<metric>/ci95_high``;
- per output (query x run) a **trace** in the project (``experiment``) with the query as input and the answer as
  output, its scores as **feedback scores**, and an **experiment item** linking the dataset item to the trace; the
  cross-run row of a query (``run = all``) is a trace of its own with the cross-run scores. A missing value is never
  a score: the trace's metadata lists it with its reason;
- a **run trace** holding the params and aggregates, with results.csv, summary.csv, report.html and manifest.json
  attached -- and a large run's report pages, each named by its place in the folder (``report-queries/page-0001.html``).

Every id is derived from the run (the manifest's bytes) and the experiment name, so logging the same folder again
-- after a failure half-way, say -- writes the same ids: the server upserts instead of duplicating.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import json
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import ConfigError
from open_rag_eval.core.redaction import register_secret, safe_url
from open_rag_eval.tracking.opik_client import OpikClient, OpikError
from open_rag_eval.tracking.options import TrackingOptions
from open_rag_eval.tracking.record import RunRecord

__all__ = ["DEFAULT_URL", "log_run", "opik_settings", "stable_id"]

DEFAULT_URL = "http://localhost:5173/api"  # a local Opik server (its docker compose); Opik's cloud: see the docs
_BATCH = 500
_MIME = {".csv": "text/csv", ".html": "text/html", ".json": "application/json"}
_LABELS = ("relevant_ids", "expected_keywords", "expected_refusal", "required_citations", "reference_answer",
           "grounding_ids")
_EPOCH_MS = 1_700_000_000_000  # the time part of derived ids: fixed, plus a hash (ids must be UUID version 7)


def stable_id(*parts: str, at: datetime | None = None) -> str:
    """A UUID version 7 (Opik requires them) derived from ``parts``: the same parts, the same id. Its time part is
    ``at`` (a run's creation time: Opik orders traces by it), else a fixed time plus a hash."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8")).digest()
    millis = int(at.timestamp() * 1000) if at is not None else _EPOCH_MS + int.from_bytes(digest[:4], "big")
    raw = bytearray(millis.to_bytes(6, "big") + digest[6:16])
    raw[6] = 0x70 | (raw[6] & 0x0F)
    raw[8] = 0x80 | (raw[8] & 0x3F)
    return str(uuid.UUID(bytes=bytes(raw)))


def opik_settings(options: TrackingOptions) -> tuple[str, str, str | None]:
    """URL, workspace and API key: the options, else Opik's own environment variables (``OPIK_URL_OVERRIDE``,
    ``OPIK_WORKSPACE``), else a local server's; the key from the variable ``api_key_env`` names (None: no key,
    as a local Opik needs none)."""
    url = options.tracking_uri or os.environ.get("OPIK_URL_OVERRIDE") or DEFAULT_URL
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"Opik is reached over HTTP: {safe_url(url)!r} is not an http(s) URL of its REST API "
                          "(e.g. http://localhost:5173/api)", path="tracking.tracking_uri")
    workspace = options.workspace or os.environ.get("OPIK_WORKSPACE") or "default"
    key = os.environ.get(options.api_key_env) or None
    register_secret(key)
    return url, workspace, key


def log_run(record: RunRecord, options: TrackingOptions) -> str:
    """Log ``record``; from synchronous code, or from inside a running event loop (a notebook) through a worker
    thread with its own loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_log_run(record, options))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="open-rag-eval-opik") as pool:
        return pool.submit(lambda: asyncio.run(_log_run(record, options))).result()


async def _log_run(record: RunRecord, options: TrackingOptions) -> str:
    url, workspace, api_key = opik_settings(options)
    details = _json(record.output_dir / "results.json")
    manifest = (record.output_dir / "manifest.json").read_bytes()
    run_key, at = hashlib.sha256(manifest).hexdigest(), _created(manifest)
    name = options.run_name or record.output_dir.name
    project, dataset = options.experiment, options.dataset or options.experiment
    experiment_id = stable_id("experiment", workspace, project, name, run_key, at=at)
    async with OpikClient(url, workspace=workspace, api_key=api_key, timeout_s=options.timeout_s,
                          retries=options.retries) as client:
        await client.dataset_id(dataset, stable_id("dataset", workspace, dataset),
                                "RAG queries evaluated by open-rag-eval")
        items = _dataset_items(details, record.output_dir, workspace, dataset)
        for batch in _batches(list(items.values())):
            await client.call("PUT", "v1/private/datasets/items", {"dataset_name": dataset, "items": batch})
        created = await client.call("POST", "v1/private/experiments", _experiment(
            record, options, experiment_id, name, project, dataset), ok=(409,))
        try:
            await _log_outputs(client, record, details, experiment_id, project, items, at)
            await _log_run_trace(client, record, experiment_id, name, project, at)
            await client.call("PATCH", f"v1/private/experiments/{experiment_id}", {"status": "completed"})
        except BaseException:
            if created != 409:
                await _mark_failed(client, experiment_id)
            raise
    return experiment_id


async def _mark_failed(client: OpikClient, experiment_id: str) -> None:
    try:
        await client.call("PATCH", f"v1/private/experiments/{experiment_id}", {"status": "failed"})
    except OpikError:
        pass  # the first error is the one to report


def _experiment(record: RunRecord, options: TrackingOptions, experiment_id: str, name: str, project: str,
                dataset: str) -> dict[str, Any]:
    tags = {**record.tags, **options.tags}
    return {"id": experiment_id, "name": name, "dataset_name": dataset, "project_name": project,
            "type": "regular", "status": "running",
            "metadata": {"params": record.params, "tags": tags, "metric_names": record.names,
                         "metrics_without_value": record.without_value},
            "tags": ["open-rag-eval", *(f"{key}={value}" for key, value in options.tags.items())],
            "experiment_scores": _aggregates(record)}


def _aggregates(record: RunRecord) -> list[dict[str, Any]]:
    """Each metric with a value: its mean and CI bounds, under the metric's own name (Opik takes any name)."""
    scores = []
    for key, name in record.names.items():
        for suffix in ("", "/ci95_low", "/ci95_high"):
            if key + suffix in record.metrics:
                scores.append({"name": name + suffix, "value": record.metrics[key + suffix]})
    return scores


def _dataset_items(details: dict[str, Any], folder: Path, workspace: str,
                   dataset: str) -> dict[str, dict[str, Any]]:
    """query id -> its dataset item: the query id and text, and the query's golden labels when the input had any
    (relevant_ids, expected_keywords, expected_refusal, required_citations, reference_answer, grounding_ids, as in
    outputs.jsonl); the first run of a query gives them."""
    labels = _labels(folder / "outputs.jsonl")
    items: dict[str, dict[str, Any]] = {}
    for row in [*details.get("outputs", []), *details.get("queries", [])]:
        query_id = str(row["query_id"])
        if query_id not in items:
            data = {"query_id": query_id, "query": row.get("query", ""), **labels.get(query_id, {})}
            items[query_id] = {"id": stable_id("item", workspace, dataset, query_id), "source": "sdk", "data": data}
    return items


def _labels(path: Path) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return found
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            output = json.loads(line)
            found.setdefault(str(output.get("query_id")), {
                name: output[name] for name in _LABELS if output.get(name) is not None})
    return found


async def _log_outputs(client: OpikClient, record: RunRecord, details: dict[str, Any], experiment_id: str,
                       project: str, items: dict[str, dict[str, Any]], at: datetime) -> None:
    now = _stamp(at)
    traces, scores, links = [], [], []
    rows = [(row, row.get("run")) for row in details.get("outputs", [])]
    rows += [(row, "all") for row in details.get("queries", []) if row.get("scores")]
    for row, run in rows:
        query_id = str(row["query_id"])
        trace_id = stable_id("trace", experiment_id, query_id, str(run), at=at)
        values = row.get("scores") or {}
        missing = {metric: (row.get("errors") or {}).get(metric, "no value")
                   for metric, value in values.items() if value is None}
        traces.append({"id": trace_id, "project_name": project, "name": "open-rag-eval",
                       "start_time": now, "end_time": now,
                       "input": {"query_id": query_id, "query": row.get("query", ""), "run": run},
                       "output": {"answer": row.get("answer_text")} if run != "all" else {"runs": row.get("runs")},
                       "metadata": {"results_dir": record.output_dir.name, "metrics_without_value": missing},
                       "tags": ["open-rag-eval"]})
        scores += [{"id": trace_id, "project_name": project, "name": metric, "value": float(value),
                    "source": "sdk"} for metric, value in values.items() if value is not None]
        links.append({"id": stable_id("experiment-item", experiment_id, trace_id, at=at),
                      "experiment_id": experiment_id,
                      "dataset_item_id": items[query_id]["id"], "trace_id": trace_id})
    for batch in _batches(traces):
        await client.call("POST", "v1/private/traces/batch", {"traces": batch})
    for batch in _batches(scores):
        await client.call("PUT", "v1/private/traces/feedback-scores", {"scores": batch})
    for batch in _batches(links):
        await client.call("POST", "v1/private/experiments/items", {"experiment_items": batch})


async def _log_run_trace(client: OpikClient, record: RunRecord, experiment_id: str, name: str,
                         project: str, at: datetime) -> None:
    now = _stamp(at)
    trace_id = stable_id("run-trace", experiment_id, at=at)
    await client.call("POST", "v1/private/traces/batch", {"traces": [{
        "id": trace_id, "project_name": project, "name": f"open-rag-eval run {name}", "start_time": now,
        "end_time": now, "input": {"params": record.params}, "output": {"metrics": record.metrics},
        "metadata": {"experiment_id": experiment_id, "metric_names": record.names,
                     "metrics_without_value": record.without_value, **record.tags},
        "tags": ["open-rag-eval", "run"]}]})
    for name, path in record.artifacts.items():
        await client.attach(path, name=name, trace_id=trace_id, project=project,
                            mime_type=_MIME.get(path.suffix, "application/octet-stream"))


def _created(manifest: bytes) -> datetime:
    """When the run was made (manifest.json's ``created``; now when it has none): the time of its traces and ids,
    the same every time the folder is logged."""
    try:
        created = datetime.fromisoformat(json.loads(manifest)["created"])
    except (KeyError, TypeError, ValueError):
        return datetime.now(UTC)
    return created if created.tzinfo else created.replace(tzinfo=UTC)


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _batches(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    return [items[i:i + _BATCH] for i in range(0, len(items), _BATCH)]


def _json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))
