"""What a run gives back besides its files (``RunReport``), and a finished run's result read back from them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.core.types import Detail, EvalResult, RAGOutput, Score
from open_rag_eval.health.check import HealthReport
from open_rag_eval.run.journal import JOURNAL_FILE
from open_rag_eval.run.status import RunStatus
from open_rag_eval.scoring.stats import Aggregate

__all__ = ["RunReport", "read_result"]


class RunReport:
    """What a run gives back besides its files: the summary, the manifest, whether it is incomplete, judge health.

    ``result`` and ``outputs`` are read back from the run's files when first asked for (they hold every output: a
    large run streams its files instead); ``outputs`` are those given, or a connector's as it gave them when there
    are at most ``run.start.CONTROL_OUTPUTS`` (a larger run's are read back from its outputs.jsonl); ``reasons``: the
    first reason of each metric without any value."""

    def __init__(self, result: EvalResult | None, summary: list[Aggregate], output_dir: Path,
                 manifest: dict[str, Any], info: RunInfo, outputs: list[RAGOutput] | None = None,
                 incomplete: list[dict[str, Any]] | None = None, health: HealthReport | None = None,
                 reasons: dict[str, str] | None = None) -> None:
        self._result, self._outputs = result, outputs
        self.summary, self.output_dir, self.manifest, self.info = summary, output_dir, manifest, info
        self.incomplete = incomplete or []  # judged metrics that failed for every output
        self.health = health  # None when no judge was used
        self.reasons = reasons if reasons is not None else _first_reasons(result, summary)

    @property
    def status(self) -> RunStatus:
        """Complete, or incomplete with its reasons (``run.status``)."""
        no_value = self.manifest.get("no_value")
        return RunStatus(tuple(self.incomplete), str(no_value) if no_value is not None else None)

    @property
    def result(self) -> EvalResult:
        if self._result is None:
            self._result = read_result(self.output_dir)
        return self._result

    @property
    def outputs(self) -> list[RAGOutput]:
        if self._outputs is None:
            from open_rag_eval.inputs.jsonl import read_jsonl_outputs

            path = self.output_dir / JOURNAL_FILE
            self._outputs = read_jsonl_outputs(path) if path.is_file() and path.stat().st_size else []
        return self._outputs


def _first_reasons(result: EvalResult | None, summary: Sequence[Aggregate]) -> dict[str, str]:
    empty = {a.metric for a in summary if not a.n}
    reasons: dict[str, str] = {}
    for score in result.scores if result is not None and empty else ():
        if score.metric in empty and score.error:
            reasons.setdefault(score.metric, score.error)
    return reasons


def read_result(folder: Path) -> EvalResult:
    """A finished run's scores and details, read back from its results.json (output by output, then the queries),
    as a stream (``store.json_items``): memory holds the result, not the file's text or its JSON tree."""
    from open_rag_eval.store.json_items import read_items

    result = EvalResult()

    def on_item(section: str, item: dict[str, Any]) -> None:
        run = item.get("run") if section == "outputs" else None
        query_id = str(item.get("query_id"))
        for metric, value in (item.get("scores") or {}).items():
            result.scores.append(Score(query_id=query_id, run=run, metric=metric, value=value))
        for metric, error in (item.get("errors") or {}).items():
            result.scores.append(Score(query_id=query_id, run=run, metric=metric, error=error or "missing"))
        for name, data in (item.get("details") or {}).items():
            result.details.append(Detail(query_id=query_id, run=run, section=name, data=data))

    read_items(folder / "results.json", on_item)
    return result
