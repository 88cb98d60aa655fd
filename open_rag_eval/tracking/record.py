"""What a tracking backend logs, read back from a finished run's results folder (docs/RESULTS.md)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import StorageError
from open_rag_eval.run.generation import PAGES_DIR, run_files

__all__ = ["ARTIFACTS", "RunRecord", "metric_key", "read_record"]

# the run files logged as artifacts (results.json and outputs.jsonl are not: the tables and the report say it all),
# the report's pages (``report-queries/``, a large run's) with report.html so that its links resolve
ARTIFACTS = ("results.csv", "summary.csv", "report.html", PAGES_DIR, "manifest.json")
_NOT_ALLOWED = re.compile(r"[^A-Za-z0-9_\-. /:]")


def metric_key(name: str) -> str:
    """A metric or param name as tracking backends accept it: ``@`` becomes ``_at_``, any other character outside
    letters, digits, ``_ - . / :`` and space becomes ``_`` (``umbrela.ndcg@5`` -> ``umbrela.ndcg_at_5``)."""
    return _NOT_ALLOWED.sub("_", name.replace("@", "_at_"))


@dataclass
class RunRecord:
    output_dir: Path
    params: dict[str, str]
    metrics: dict[str, float]  # backend key -> value: "<metric>" (mean), "<metric>/ci95_low", "<metric>/ci95_high"
    names: dict[str, str]  # backend key of a mean -> the metric's own name
    without_value: dict[str, str]  # metric -> its status (failed, undefined, unavailable): nothing logged for it
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def artifacts(self) -> dict[str, Path]:
        """The files to log: name in the run's folder (``report-queries/page-0001.html``) -> path, in
        ``ARTIFACTS`` order."""
        files = run_files(self.output_dir)
        return {name: path for top in ARTIFACTS for name, path in files.items() if name.split("/")[0] == top}


def read_record(output_dir: Path) -> RunRecord:
    manifest = _json(output_dir / "manifest.json")
    summary = _json(output_dir / "results.json").get("summary") or []
    metrics: dict[str, float] = {}
    names: dict[str, str] = {}
    without: dict[str, str] = {}
    for row in summary:
        name, mean = str(row["metric"]), row.get("mean")
        if mean is None:  # never invent a number: a metric without a value is listed, not logged as 0
            without[name] = str(row.get("status") or "no value")
            continue
        key = metric_key(name)
        names[key] = name
        metrics[key] = float(mean)
        for bound in ("ci95_low", "ci95_high"):
            if row.get(bound) is not None:
                metrics[f"{key}/{bound}"] = float(row[bound])
    return RunRecord(output_dir, _params(manifest), metrics, names, without, _tags(manifest, output_dir))


def _params(manifest: dict[str, Any]) -> dict[str, str]:
    judge = manifest.get("judge") or {}
    params = {
        "config_digest": manifest.get("config_digest"),
        "input_sha256": (manifest.get("input") or {}).get("sha256"),
        "evaluators": ",".join(manifest.get("evaluators") or []),
        "judge_model": judge.get("model"),
        "judge_simulated": manifest.get("simulated"),
        "tool_version": manifest.get("tool_version"),
        "n_outputs": manifest.get("n_outputs"),
        "n_queries": manifest.get("n_queries"),
    }
    sent = manifest.get("prompts_sent")  # the templates the run used; a manifest of an older version: every one
    for prompt, digest in sorted((manifest.get("prompt_hashes") or {}).items()):
        if sent is None or prompt in sent:
            params[metric_key(f"prompt.{prompt}")] = digest
    return {key: str(value) for key, value in params.items() if value is not None}


def _tags(manifest: dict[str, Any], output_dir: Path) -> dict[str, str]:
    from open_rag_eval.run.status import RunStatus  # noqa: PLC0415

    status = RunStatus.from_manifest(manifest)
    from open_rag_eval.core.missing import scrub_paths  # noqa: PLC0415

    reasons = {"open_rag_eval.incomplete": scrub_paths(status.summary())[:250]} if not status.complete else {}
    return {"open_rag_eval.complete": str(status.complete).lower(), "open_rag_eval.status": status.state, **reasons,
            "open_rag_eval.simulated": str(bool(manifest.get("simulated"))).lower(),
            "open_rag_eval.results_dir": output_dir.name}


def _json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise StorageError(f"cannot read the run's results for tracking: {error.strerror}", path=path) from None
    except ValueError as error:
        raise StorageError(f"not valid JSON for tracking: {error}", path=path) from None
