"""Run the diagnosis rules over a run's metric means: pure, no I/O.

A check reads the first of its candidate metrics that has a mean. A rule fires when all its checks hold; it is
decided (and silent) as soon as one check with a value does not hold; otherwise, when a metric it needs is missing
from the run or has no value (every value failed or is undefined), it is *not checked* and the reason is kept --
a rule never fires on a number that is not there. When a rule fires, the rules it ``replaces`` are dropped.

The judge's health comes first: when manifest.json's ``health`` says the judge is unhealthy, a line says so before
any finding, and a finding whose metrics rest on an unhealthy judge task is marked uncertain. Golden, lexical and
latency metrics use no judge and are never doubted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from open_rag_eval.core.judge_tasks import tasks_of
from open_rag_eval.diagnosis import trec
from open_rag_eval.diagnosis.options import DiagnosisOptions
from open_rag_eval.diagnosis.rules import CRITERIA_COLUMNS, RULES, Check, Rule

__all__ = ["Diagnosis", "Finding", "diagnose"]

Means = Mapping[str, float | None]
_RULES = {rule.name: rule for rule in RULES}


@dataclass(frozen=True)
class Finding:
    rule: str
    area: str
    text: str
    source: str
    uncertain: str = ""  # why the numbers may show the judge rather than the system


@dataclass
class Diagnosis:
    judge: str | None = None  # the unhealthy judge, said first
    findings: list[Finding] = field(default_factory=list)
    unchecked: list[tuple[str, str]] = field(default_factory=list)  # (rule, why it could not be checked)
    disabled: list[str] = field(default_factory=list)
    enabled: bool = True


def _value(means: Means, candidates: Sequence[str]) -> tuple[str, float | None]:
    """(metric, mean) of the first candidate with a mean; else (the first present one, None) or (all, None)."""
    present = None
    for name in candidates:
        if name in means:
            value = means[name]
            if value is not None and math.isfinite(float(value)):
                return name, float(value)
            present = present or name
    return present or " / ".join(candidates), None


def _holds(value: float, op: str, threshold: float) -> bool:
    return value < threshold if op == "<" else value > threshold if op == ">" else value >= threshold


def _why_missing(metric: str, means: Means, unavailable: Mapping[str, str]) -> str:
    if metric in unavailable:
        return f"{metric} is unavailable ({unavailable[metric]})"
    if metric in means:
        return f"{metric} has no value (every value failed or is undefined)"
    return f"{metric} is not in this run"


def _evaluate(rule: Rule, means: Means, options: DiagnosisOptions, unavailable: Mapping[str, str]
              ) -> tuple[str, list[tuple[Check, str, float]], str]:
    """("fired" | "silent" | "unchecked", the checks' (check, metric, value), why unchecked)."""
    read, missing, silent = [], [], False
    for check in rule.checks:
        metric, value = _value(means, options.candidates(rule, check))
        if value is None:
            missing.append(_why_missing(metric, means, unavailable))
            continue
        read.append((check, metric, value))
        silent = silent or not _holds(value, check.op, options.threshold(rule, check))
    if silent:
        return "silent", read, ""
    if missing:
        return "unchecked", read, "; ".join(missing)
    return "fired", read, ""


def _tasks(metrics: Sequence[str], unhealthy: Sequence[str]) -> list[str]:
    """The unhealthy judge tasks ``metrics`` rest on (every unhealthy task for a judged family we do not know)."""
    shaky: list[str] = []
    for metric in metrics:
        known = tasks_of(metric)
        shaky += [task for task in unhealthy if known is None or task in known]
    return list(dict.fromkeys(shaky))


def _text(rule: Rule, read: Sequence[tuple[Check, str, float]], options: DiagnosisOptions) -> str:
    numbers = ", ".join(f"{metric} = {value:.3f} {check.op} {options.threshold(rule, check):g}"
                        for check, metric, value in read)
    return f"{rule.symptom} ({numbers}): {rule.advice}"


def _criteria_findings(rule: Rule, means: Means, options: DiagnosisOptions, unhealthy: Sequence[str]) -> list[Finding]:
    """One finding per ``criteria.<name>`` mean under the rule's threshold (the user names the columns)."""
    check = rule.checks[0]
    found = []
    for metric in sorted(m for m in means if m.startswith("criteria.")):
        _, value = _value(means, (metric,))
        if value is not None and _holds(value, check.op, options.threshold(rule, check)):
            shaky = _tasks([metric], unhealthy)
            found.append(Finding(rule.name, rule.area, _text(rule, [(check, metric, value)], options), rule.source,
                                 trec.uncertain_note(shaky) if shaky else ""))
    return found


def diagnose(means: Means, options: DiagnosisOptions | None = None, *, health: Mapping[str, Any] | None = None,
             evidence: bool | None = None, unavailable: Mapping[str, str] | None = None) -> Diagnosis:
    """The findings of every active rule over ``means`` (metric -> mean; None = no value), judge health first;
    ``unavailable``: metric -> why, for metrics that cannot be computed here (a rule needing one says so)."""
    options = options or DiagnosisOptions()
    result = Diagnosis(disabled=[rule.name for rule in RULES if not options.active(rule)], enabled=options.enabled)
    if not options.enabled:
        return result
    unhealthy = trec.unhealthy_tasks(health)
    if unhealthy:
        result.judge = trec.judge_line(unhealthy)
    fired: list[Finding] = []
    for rule in RULES:
        if not options.active(rule):
            continue
        if rule.checks[0].metrics == (CRITERIA_COLUMNS,):
            fired += _criteria_findings(rule, means, options, unhealthy)
            continue
        state, read, why = _evaluate(rule, means, options, unavailable or {})
        if state == "unchecked":
            result.unchecked.append((rule.name, why))
        elif state == "fired" and not rule.custom:
            shaky = _tasks([metric for _, metric, _ in read], unhealthy)
            note = trec.uncertain_note(shaky) if shaky else ""
            fired.append(Finding(rule.name, rule.area, _text(rule, read, options), rule.source, note))
    for name, area, text in trec.system_hints(means, evidence, trec.thresholds(options), options):
        shaky = trec.shaky(area, unhealthy)
        source = _RULES[name].source
        fired.append(Finding(name, area, trec.hedge(text, area) if shaky else text, source,
                             trec.uncertain_note(shaky) if shaky else ""))
    replaced = {name for finding in fired for name in _RULES[finding.rule].replaces}
    result.findings = [finding for finding in fired if finding.rule not in replaced]
    return result
