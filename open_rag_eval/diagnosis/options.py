"""The ``diagnosis:`` section of a config: which rules run, their thresholds and the metrics they read.

    diagnosis:
      disable: [low_mrr]                       # rule names (docs/diagnosis.md lists them)
      thresholds: {low_recall.recall: 0.6}     # <rule>.<check>: number
      metrics: {low_recall.recall: golden.hit@5}   # <rule>.<check>: the metric the check reads
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from open_rag_eval.diagnosis.rules import RULES, Check, Rule

from open_rag_eval.core.sections import register_section
__all__ = ["DiagnosisOptions", "options_from_manifest"]

_RULE_NAMES = tuple(rule.name for rule in RULES)
_CHECK_NAMES = tuple(f"{rule.name}.{check.name}" for rule in RULES for check in rule.checks)


def _known(keys: Any, valid: tuple[str, ...], what: str) -> None:
    unknown = [key for key in keys if key not in valid]
    if unknown:
        raise ValueError(f"unknown {what} {', '.join(map(repr, unknown))}; valid: {', '.join(valid)}")


class DiagnosisOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    disable: list[str] = []
    thresholds: dict[str, float] = {}
    metrics: dict[str, str] = {}

    @field_validator("disable")
    @classmethod
    def _rules(cls, value: list[str]) -> list[str]:
        _known(value, _RULE_NAMES, "rule")
        return value

    @field_validator("thresholds")
    @classmethod
    def _thresholds(cls, value: dict[str, float]) -> dict[str, float]:
        _known(value, _CHECK_NAMES, "check")
        if any(not math.isfinite(number) for number in value.values()):
            raise ValueError("thresholds must be finite numbers")
        return value

    @field_validator("metrics")
    @classmethod
    def _metrics(cls, value: dict[str, str]) -> dict[str, str]:
        _known(value, _CHECK_NAMES, "check")
        if any(not name.strip() for name in value.values()):
            raise ValueError("a metric name must not be empty")
        return value

    def threshold(self, rule: Rule, check: Check) -> float:
        return self.thresholds.get(f"{rule.name}.{check.name}", check.threshold)

    def candidates(self, rule: Rule, check: Check) -> tuple[str, ...]:
        chosen = self.metrics.get(f"{rule.name}.{check.name}")
        return (chosen,) if chosen else check.metrics

    def active(self, rule: Rule) -> bool:
        return self.enabled and rule.name not in self.disable


def options_from_manifest(manifest: Mapping[str, Any]) -> DiagnosisOptions:
    """The options the run's config (kept in manifest.json) gave; the defaults when it gave none or they no longer
    validate (a results folder written by another version)."""
    config = manifest.get("config")
    section = config.get("diagnosis") if isinstance(config, Mapping) else None
    if not isinstance(section, Mapping):
        return DiagnosisOptions()
    try:
        return DiagnosisOptions.model_validate(dict(section))
    except ValidationError:
        return DiagnosisOptions()


register_section("diagnosis", DiagnosisOptions)  # core.sections: `diagnosis:` is validated at load with this schema
