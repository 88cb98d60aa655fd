"""Read the peer's (vectara open-rag-eval) result CSVs into our rows and metric names.

TREC CSV: ``query_id, query`` then per run ``run_N_<field>`` columns whose cells hold JSON, e.g.
``run_1_retrieval_score_mean_umbrela_score`` = ``2.25`` or ``run_1_generation_score_no_answer_score`` =
``{"query_answered": "yes"}``. Older files have the same fields without the ``run_N_`` prefix (one run).
Consistency CSV: ``consistency_<metric>`` cells hold ``{"values": [...], "stats": {...}}``, one row per query.

The peer writes no failure reasons; an empty or unparsable cell is a missing value here (logged), never a number.
"""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.report.data import ResultSet, Row

__all__ = ["PEER_NAMES", "is_consistency", "is_trec", "load_consistency", "load_trec", "metric_name"]

log = logging.getLogger(__name__)

_RUN = re.compile(r"^run_([0-9]+)_(.+)$")

# the peer's field (without run prefix) or consistency metric -> our metric name
PEER_NAMES: dict[str, str] = {
    "retrieval_score_mean_umbrela_score": "umbrela.mean",
    "generation_score_vital_nuggetizer_score": "nuggets.vital",
    "generation_score_hallucination_score": "hhem.score",
    "generation_score_hallucination_scores": "hhem.score",
    "generation_score_citation_f1_score": "citation.f1",
    "questions_answered": "no_answer.answered",
    "mean_umbrela_score": "umbrela.mean",
    "vital_nuggetizer_score": "nuggets.vital",
    "hallucination_score": "hhem.score",
    "hallucination_scores": "hhem.score",
    "citation_f1_score": "citation.f1",
    "bert_score": "consistency.bertscore_f1",
    "rouge_score": "consistency.rougeL",
}
_STATS = ("mean", "median", "std", "cv", "iqr", "min", "max")
_NUGGET_KEYS = {"all": "nuggets.all", "all_strict": "nuggets.all_strict", "vital": "nuggets.vital",
                "vital_strict": "nuggets.vital_strict", "weighted": "nuggets.weighted",
                "weighted_strict": "nuggets.weighted_strict"}


def metric_name(name: str) -> str:
    """Our name for a metric given in either vocabulary (``consistency_bert_score`` or ``umbrela.mean``)."""
    if name in PEER_NAMES:
        return PEER_NAMES[name]
    if name.startswith("consistency_"):
        return PEER_NAMES.get(name[len("consistency_"):], f"consistency.{name[len('consistency_'):]}")
    return name


def is_trec(header: list[str]) -> bool:
    return any(_RUN.match(name) or name.startswith(("retrieval_score_", "generation_score_")) for name in header)


def is_consistency(header: list[str]) -> bool:
    return any(name.startswith("consistency_") for name in header)


def _cell(text: str | None, path: Path, line: int, column: str) -> Any:
    """A JSON cell; ``NaN`` is the peer's missing value, an infinity is refused (no score is infinite)."""
    if text is None or text.strip() == "":
        return None

    def constant(name: str) -> float:
        if name == "NaN":
            return math.nan
        raise InputError(f"not a finite number: {name} in {text[:40]!r}", file=str(path), line=line, field=column)

    def number(literal: str) -> float:
        value = float(literal)
        return value if math.isfinite(value) else constant(literal)

    try:
        return json.loads(text, parse_constant=constant, parse_float=number)
    except json.JSONDecodeError:
        log.warning("%s:%d: column '%s': not JSON, treated as missing: %.40r", path, line, column, text)
        return None


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) else float(value)


def _expand(field: str, value: Any) -> dict[str, float | None]:
    """Our scores carried by one of the peer's fields."""
    out: dict[str, float | None] = {}
    if field in PEER_NAMES:
        out[PEER_NAMES[field]] = _number(value)
    elif field == "generation_score_no_answer_score" and isinstance(value, dict):
        answered = str(value.get("query_answered", "")).lower()
        out["no_answer.answered"] = 1.0 if answered == "yes" else 0.0 if answered == "no" else None
    elif field == "retrieval_score_precision_metrics" and isinstance(value, dict):
        for k, number in (value.get("precision@") or {}).items():
            out[f"umbrela.p@{k}"] = _number(number)
        for k, number in (value.get("AP@") or {}).items():
            out[f"umbrela.ap@{k}"] = _number(number)
        if "MRR" in value:
            out["umbrela.mrr"] = _number(value["MRR"])
    elif field == "generation_score_citation_scores" and isinstance(value, dict):
        for key in ("precision", "recall"):
            if key in value:
                out[f"citation.{key}"] = _number(value[key])
    elif field == "generation_score_autonugget_scores" and isinstance(value, dict):
        for key, number in (value.get("nuggetizer_scores") or {}).items():
            ours = _NUGGET_KEYS.get(str(key).lower().replace(" ", "_"))
            if ours:
                out[ours] = _number(number)
    return out


def _split_runs(header: list[str]) -> dict[int, dict[str, str]]:
    """run -> {field: column}; unprefixed score columns belong to run 1."""
    runs: dict[int, dict[str, str]] = {}
    for column in header:
        match = _RUN.match(column)
        if match:
            runs.setdefault(int(match.group(1)), {})[match.group(2)] = column
        elif column.startswith(("retrieval_score_", "generation_score_")):
            runs.setdefault(1, {}).setdefault(column, column)
    return runs


def load_trec(path: Path, header: list[str], records: list[dict[str, str]]) -> ResultSet:
    runs = _split_runs(header)
    rows: list[Row] = []
    for line, record in enumerate(records, start=2):
        for run, fields in sorted(runs.items()):
            scores: dict[str, float | None] = {}
            for field, column in fields.items():
                value = _cell(record.get(column), path, line, column)
                for metric, number in _expand(field, value).items():
                    if number is not None or metric not in scores:
                        scores[metric] = number
            if any(number is not None for number in scores.values()):
                rows.append(Row(query_id=record.get("query_id") or "", query=record.get("query") or "", run=run,
                                scores={k: v for k, v in scores.items() if v is not None}))
    return ResultSet(label=path.name, path=path, layout="peer-trec", rows=rows)


def load_consistency(path: Path, header: list[str], records: list[dict[str, str]]) -> ResultSet:
    columns = [name for name in header if name.startswith("consistency_")]
    rows: list[Row] = []
    run_values: dict[str, dict[str, list[float]]] = {}
    for line, record in enumerate(records, start=2):
        query_id, query = record.get("query_id") or "", record.get("query") or ""
        summary = Row(query_id=query_id, query=query, run=None)
        for column in columns:
            data = _cell(record.get(column), path, line, column)
            if not isinstance(data, dict):
                continue
            metric = metric_name(column)
            values = [v for v in (_number(x) for x in data.get("values") or []) if v is not None]
            run_values.setdefault(metric, {})[query_id] = values
            stats = data.get("stats") or {}
            base = metric if metric.startswith("consistency.") else f"consistency.{metric}"
            for stat in _STATS:
                if _number(stats.get(stat)) is not None:
                    summary.scores[f"{base}.{stat}"] = _number(stats.get(stat))
            if _number(stats.get("consistency_adjusted_index")) is not None:
                summary.scores[f"{base}.cai"] = _number(stats["consistency_adjusted_index"])
            if _number(stats.get("max_min")) is not None:
                summary.scores[f"{base}.range"] = _number(stats["max_min"])
            if metric.startswith("consistency.") and values:
                summary.scores[metric] = math.fsum(values) / len(values)
        rows.append(summary)
    return ResultSet(label=path.name, path=path, layout="peer-consistency", rows=rows, run_values=run_values)
