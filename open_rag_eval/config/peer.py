"""Translate vectara's open-rag-eval config layout to ours (docs/profiles.md).

Its keys: ``input_queries, results_folder, generated_answers, eval_results_file, metrics_file`` and
``evaluator: [{type: TRECEvaluator | ConsistencyEvaluator, model: {type, name, api_key, base_url}, options: {...}}]``
or, as its metrics documentation writes it, ``evaluator: {name: trecrag | consistency, options: {...}}`` (a single
mapping or a list). The answers CSV ``results_folder/generated_answers`` becomes our ``input``; results go to
``results_folder``. The judge key must come from an environment variable: ``${oc.env:NAME}`` becomes
``api_key_env: NAME``; a literal key is refused rather than copied into outputs. Our own ``judge:``, ``profile:`` and
``output_dir:`` sections may accompany the layout; the profile defaults to ``vectara`` (its own metric definitions).

Its ``run_consistency`` (true when ``metrics_to_run_consistency`` names a metric) decides which runs the TREC
evaluator scores: false scores each query's first run only (``runs: first``), as vectara does. Its documented
chaining -- a TRECEvaluator with ``run_consistency: true`` and a ConsistencyEvaluator entry -- is one ``consistency``
evaluator here: the spread of the TREC metrics (and of HHEM's score, which its ConsistencyEvaluator always adds) and
the ConsistencyEvaluator's similarity metrics together.
"""

from __future__ import annotations

import re
from typing import Any

from open_rag_eval.core.errors import ConfigError

__all__ = ["EVALUATOR_NAMES", "is_peer_config", "translate_peer_config"]

PEER_KEYS = {"input_queries", "results_folder", "generated_answers", "eval_results_file", "metrics_file", "evaluator"}

# the peer's TREC metric names -> ours
METRIC_NAMES = {
    "mean_umbrela_score": "umbrela.mean",
    "vital_nuggetizer_score": "nuggets.vital",
    "all_nuggetizer_score": "nuggets.all",
    "weighted_nuggetizer_score": "nuggets.weighted",
    "vital_strict_nuggetizer_score": "nuggets.vital_strict",
    "all_strict_nuggetizer_score": "nuggets.all_strict",
    "weighted_strict_nuggetizer_score": "nuggets.weighted_strict",
    "citation_f1_score": "citation.f1",
    "citation_precision": "citation.precision",
    "citation_recall": "citation.recall",
    "hhem_score": "hhem.score",
}

# its evaluator names (``type:`` or ``name:``) -> ours
EVALUATOR_NAMES = {"TRECEvaluator": "trec", "trecrag": "trec", "trec": "trec",
                   "ConsistencyEvaluator": "consistency", "consistency": "consistency"}
PASSED_THROUGH = ("judge", "profile", "output_dir")  # our sections allowed beside its layout
DEFAULT_PROFILE = "vectara"

_ENV_REF = re.compile(r"^\$\{(?:oc\.env:)?([A-Za-z_][A-Za-z0-9_]*)\}$")


_PEER_ENTRY_KEYS = {"type", "name", "model", "options"}
_PEER_TYPES = ("TRECEvaluator", "ConsistencyEvaluator")


def is_peer_config(raw: dict[str, Any]) -> bool:
    """Whether ``raw`` is in vectara's layout: one of its own keys (``input_queries``, ``results_folder``...), or an
    ``evaluator`` section of its own shape (``_peer_evaluator``). An ``evaluator:`` holding our evaluator list (a
    typo of ``evaluators:``) is not: it is an unknown key, named as such with the nearest known one."""
    if "evaluators" in raw:
        return False
    if (PEER_KEYS - {"evaluator"}) & raw.keys():
        return True
    entries = raw.get("evaluator")
    entries = [entries] if isinstance(entries, dict) else entries
    return isinstance(entries, list) and bool(entries) and all(_peer_evaluator(e) for e in entries)


def _peer_evaluator(entry: Any) -> bool:
    """vectara's shape of an evaluator: ``{type: TRECEvaluator | ConsistencyEvaluator, model?, options?}`` or
    ``{name: ..., options: {...}}``, and no other key."""
    if not isinstance(entry, dict) or not entry.keys() <= _PEER_ENTRY_KEYS:
        return False
    return entry.get("type") in _PEER_TYPES or ("name" in entry and "options" in entry and "type" not in entry)


def translate_peer_config(raw: dict[str, Any], *, file: str) -> dict[str, Any]:
    folder = str(raw.get("results_folder", "results/")).rstrip("/") or "."
    answers = str(raw.get("generated_answers", "answers.csv"))
    entries = raw.get("evaluator")
    if isinstance(entries, dict):
        entries = [entries]
    if not isinstance(entries, list) or not entries:
        raise ConfigError("expected a list of evaluators", path="evaluator", file=file)
    ours: dict[str, Any] = {"input": f"{folder}/{answers}", "output_dir": folder, "evaluators": []}
    ours.update({key: raw[key] for key in PASSED_THROUGH if key in raw})
    ours.setdefault("profile", DEFAULT_PROFILE)
    for i, entry in enumerate(entries):
        _translate_evaluator(entry, f"evaluator[{i}]", ours, file)
    ours["evaluators"] = _one_consistency(ours["evaluators"])
    return ours


def _one_consistency(evaluators: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evaluators with every ``consistency`` entry merged into the first (vectara's chaining)."""
    spreads = [e for e in evaluators if e["type"] == "consistency"]
    if len(spreads) < 2:
        return evaluators
    merged: dict[str, Any] = {"type": "consistency"}
    metrics: list[str] = []
    for entry in spreads:
        metrics += [m for m in entry.get("metrics", ["rouge", "bertscore", "dispersion"]) if m not in metrics]
        merged.update({key: value for key, value in entry.items() if key != "metrics"})
    merged["metrics"] = metrics
    if isinstance(merged.get("dispersion_of"), list) and "hhem.score" not in merged["dispersion_of"]:
        merged["dispersion_of"] = [*merged["dispersion_of"], "hhem.score"]  # its ConsistencyEvaluator adds HHEM's
    first = evaluators.index(spreads[0])
    rest = [e for e in evaluators if e["type"] != "consistency"]
    return [*rest[:first], merged, *rest[first:]]


def _translate_evaluator(entry: Any, path: str, ours: dict[str, Any], file: str) -> None:
    if not isinstance(entry, dict) or not ("type" in entry or "name" in entry):
        raise ConfigError("expected a mapping with a 'name' (or 'type')", path=path, file=file)
    options = entry.get("options") or {}
    if not isinstance(options, dict):
        raise ConfigError("expected a mapping", path=f"{path}.options", file=file)
    key = "type" if "type" in entry else "name"
    kind = EVALUATOR_NAMES.get(str(entry[key]))
    if kind == "trec":
        if "model" in entry:
            ours["judge"] = _judge(entry["model"], f"{path}.model", file)
        trec: dict[str, Any] = {"type": "trec"}
        if "k_values" in options:
            trec["k_values"] = options["k_values"]
        names = options.get("metrics_to_run_consistency") or []
        consistent = bool(options.get("run_consistency") or names)  # a metric named turns it on, as in vectara
        trec["runs"] = "all" if consistent else "first"
        ours["evaluators"].append(trec)
        if consistent:
            spread = [METRIC_NAMES.get(n, n) for n in names] or "all numeric"  # none named: every numeric one
            ours["evaluators"].append({"type": "consistency", "dispersion_of": spread})
    elif kind == "consistency":
        if "model" in entry:
            ours["judge"] = _judge(entry["model"], f"{path}.model", file)
        ours["evaluators"].append(_consistency(options, path, file))
    else:
        raise ConfigError(
            f"evaluator {key} '{entry[key]}' has no counterpart here; valid: TRECEvaluator, ConsistencyEvaluator "
            "(type:) or trecrag, consistency (name:) -- or write the config in open-rag-eval's own layout: trec, "
            "consistency, golden",
            path=f"{path}.{key}",
            file=file,
        )


def _judge(model: Any, path: str, file: str) -> dict[str, Any]:
    if not isinstance(model, dict):
        raise ConfigError("expected a mapping", path=path, file=file)
    judge: dict[str, Any] = {"model": model.get("name", "gpt-4o-mini")}
    if model.get("base_url"):
        judge["base_url"] = model["base_url"]
    key = model.get("api_key")
    if key is not None:
        match = _ENV_REF.match(str(key))
        if match is None:
            raise ConfigError(
                "write the API key as ${oc.env:NAME} (an environment variable); a literal key would land in outputs",
                path=f"{path}.api_key",
                file=file,
            )
        judge["api_key_env"] = match.group(1)
    return judge


def _consistency(options: dict[str, Any], path: str, file: str) -> dict[str, Any]:
    ours: dict[str, Any] = {"type": "consistency"}
    metrics = []
    for i, item in enumerate(options.get("metrics") or []):
        name, settings = next(iter(item.items())) if isinstance(item, dict) and item else (item, {})
        if name == "bert_score":
            metrics.append("bertscore")
            ours["bertscore"] = dict(settings or {})
        elif name == "rouge_score":
            metrics.append("rouge")
        else:
            raise ConfigError(f"unknown consistency metric {name!r}; valid: bert_score, rouge_score",
                              path=f"{path}.options.metrics[{i}]", file=file)
    if metrics:
        ours["metrics"] = [*metrics, "dispersion"]
    return ours
