"""The judge-health block the console prints at the end of a run (plain text, one line per task)."""

from __future__ import annotations

from open_rag_eval.health.check import HealthReport

__all__ = ["health_lines"]

_COLUMNS = ("clean", "fallback", "echo", "invalid", "failed", "reasked")


def health_lines(report: HealthReport) -> list[str]:
    """A small table (share of judgments per parse class, per task), then the verdict and each problem."""
    if not report.tasks:
        return []
    width = max(len(task) for task in report.tasks)
    lines = [f"judge health: {'healthy' if report.healthy else 'UNHEALTHY'} "
             "(share of judgments per task; docs/judge-health.md)",
             f"  {'task':<{width}}  {'n':>5}  " + "  ".join(f"{c:>8}" for c in _COLUMNS)]
    for task, row in report.tasks.items():
        cells = "  ".join(f"{row['rates'][c]:>8.1%}" for c in _COLUMNS)
        lines.append(f"  {task:<{width}}  {row['judgments']:>5}  {cells}")
    for problem in report.problems:
        lines.append(f"  ! {problem}")
    if not report.healthy:
        lines.append("  the judge, not the system, may explain these scores: see 'Judge health' in the README")
    return lines
