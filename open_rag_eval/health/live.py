"""Judge health while the run judges: every ``every`` judgments of a task (first after two dozen), the health so
far as one console line (a progress ``Event`` of kind ``health``), naming each problem's cause; and the controls'
verdicts as soon as they are in. Nothing is shown while there is nothing to say (no judgment, no verdict, no
problem). The end-of-run report is the one that counts; this line is the early warning."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from open_rag_eval.core.progress import Event
from open_rag_eval.health.check import FAIL, HealthReport, HealthThresholds, assess
from open_rag_eval.core.recording import HealthRecorder

__all__ = ["LiveHealth"]

EVERY = 24


class LiveHealth:
    """A ``HealthRecorder`` watch: ``notify`` gets a new health line every ``every`` judgments of a task."""

    def __init__(self, notify: Callable[[Event], None], thresholds: HealthThresholds, every: int = EVERY) -> None:
        self.notify, self.thresholds, self.every = notify, thresholds, every
        self.controls: Mapping[str, Any] | None = None
        self.recorder: HealthRecorder | None = None

    def __call__(self, recorder: HealthRecorder, task: str) -> None:
        self.recorder = recorder
        if recorder.tasks[task].judgments % self.every == 0:
            self.show()

    def controls_done(self, controls: Mapping[str, Any] | None) -> None:
        self.controls = controls
        self.show()

    def show(self) -> None:
        report = assess(self.recorder or HealthRecorder(), [], self.thresholds, self.controls)
        n = sum(row["judgments"] for row in report.tasks.values())
        verdicts = ", ".join(f"{task} {_verdict(report, task, row['verdict'])}"
                             for task, row in report.controls.items())
        controls = f"; controls: {verdicts}" if verdicts else "; controls pending" if self.controls is None else ""
        if report.problems:
            self.notify(Event("health", f"judge health so far ({n} judgments): UNHEALTHY: "
                                        + " | ".join(report.problems) + controls, "warning"))
        elif n:
            self.notify(Event("health", f"judge health so far ({n} judgments): no problem{controls}"))
        elif verdicts:  # nothing judged yet to speak of, but the controls have their verdicts
            self.notify(Event("health", f"judge controls: {verdicts}"))


def _verdict(report: HealthReport, task: str, verdict: str) -> str:
    """A failed control that does not make its task unhealthy (a criterion's, while its grades are not all one
    label: ``HealthReport.controls_failed``) says so: "no problem" beside a bare "fail" reads as a contradiction."""
    return "fail (a problem only if its grades are all one label)" \
        if verdict == FAIL and not report.controls_failed(task) else verdict
