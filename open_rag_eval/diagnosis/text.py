"""The diagnosis as a person reads it: lines for the console, the same words in the report."""

from __future__ import annotations

import textwrap

from open_rag_eval.diagnosis.check import Diagnosis

__all__ = ["diagnosis_lines", "unchecked_summary"]


def unchecked_summary(diagnosis: Diagnosis) -> list[str]:
    """The rules that could not be checked, grouped: those whose metrics this run does not have, then each rule
    whose metric has no value (with why)."""
    absent = [rule for rule, why in diagnosis.unchecked if _absent(why)]
    lines = [f"{rule}: {why}" for rule, why in diagnosis.unchecked if not _absent(why)]
    if absent:
        lines.append(f"not measured in this run: {', '.join(absent)}")
    return lines


def diagnosis_lines(diagnosis: Diagnosis) -> list[str]:
    """The console's diagnosis block."""
    if not diagnosis.enabled:
        return ["diagnosis: off (diagnosis.enabled is false)"]
    lines = ["diagnosis (docs/diagnosis.md; thresholds in the config's diagnosis: section):"]
    if diagnosis.judge:
        lines.append(f"  ! judge: {diagnosis.judge}")
    for finding in diagnosis.findings:
        note = f" [{finding.uncertain}]" if finding.uncertain else ""
        lines.append(f"  - {finding.area}: {finding.text}{note} ({finding.rule}; {finding.source})")
    if not diagnosis.findings:
        lines.append("  no rule fired")
    unchecked = [f"{rule}: {why}" for rule, why in diagnosis.unchecked if not _absent(why)]
    if unchecked:
        lines.append("  could not be checked:")
        lines += [textwrap.fill(line, 116, initial_indent="    ", subsequent_indent="      ") for line in unchecked]
    absent = sum(_absent(why) for _, why in diagnosis.unchecked)
    if absent:  # the console stays short; report.html names them
        lines.append(f"  {absent} rule{'s' * (absent > 1)} need metrics this run does not measure (report.html names them)")
    return lines


def _absent(why: str) -> bool:
    return why.endswith("is not in this run")
