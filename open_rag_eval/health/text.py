"""The judge-health block the console prints (plain text, one line per task), at the end of a run and while it runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from open_rag_eval.health.check import HealthReport, verdict_line

__all__ = ["controls_lines", "health_lines"]

_COLUMNS = ("clean", "fallback", "echo", "invalid", "failed", "reasked")


def health_lines(report: HealthReport) -> list[str]:
    """A small table (share of judgments per parse class, the commonest label and its share, per task), the
    controls, then the verdict's problems (each naming its cause) and notes."""
    if not report.tasks and not report.controls:
        return []
    width = max([len(task) for task in [*report.tasks, *report.controls]] + [4])
    replies = "" if report.reply_format == "text" else f"; replies asked as {report.reply_format}"
    lines = [f"judge health: {'healthy' if report.healthy else 'UNHEALTHY'} "
             f"(share of judgments per task{replies}; docs/judge-health.md)",
             f"  {'task':<{width}}  {'n':>5}  " + "  ".join(f"{c:>8}" for c in _COLUMNS) + "  top label"]
    for task, row in report.tasks.items():
        cells = "  ".join(f"{row['rates'][c]:>8.1%}" for c in _COLUMNS)
        top = f"  {row['top_label']!r} {row['top_label_share']:.0%} of {row['n_labels']}" if row.get("n_labels") else ""
        lines.append(f"  {task:<{width}}  {row['judgments']:>5}  {cells}{top}")
    lines += controls_lines(report.controls, report.controls_state)
    for problem in report.problems:
        lines.append(f"  ! {problem}")
    for note in report.notes:
        lines.append(f"  - {note}")
    if not report.healthy:
        lines.append("  the judge, not the system, may explain these scores: see 'Judge health' in the README")
    return lines


def controls_lines(controls: Mapping[str, Mapping[str, Any]], state: str = "run") -> list[str]:
    """One line per task: the verdict, the share of pairs told apart with its 95% interval, the accuracy."""
    if state == "off":
        return ["  controls: off (judge.health.controls: false)"]
    if not controls:
        return [] if state == "run" else [f"  controls: {state}"]
    lines = ["  controls (judgments with a known answer, kept out of the metrics):"]
    return lines + [f"    {verdict_line(task, c)}" for task, c in controls.items()]
