"""Live counters of one run, written by the pipeline and the evaluators, read by the console's progress display.

Stages run in order: ``read`` (config and input), ``fetch`` (a connector asks the system), one per evaluator,
``write`` (results and report). An evaluator reports outputs done (``report(stage, "outputs", n)``), what it
is busy with between them (``report(stage, "ROUGE", 0)``) and the local models it runs
(``report(stage, "model HHEM", 0)`` when it starts, ``"model HHEM done"`` when it ends). No dependencies: the display imports this
before anything heavy loads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Progress"]


@dataclass
class Progress:
    """Live counters for a progress display."""

    outputs_total: int = 0
    done: dict[str, int] = field(default_factory=dict)  # stage (evaluator) -> outputs done
    judge: Any = None
    stages: list[str] = field(default_factory=list)  # every stage of the run, in order, once known
    stage: str | None = None  # the running stage
    steps: dict[str, str] = field(default_factory=dict)  # stage -> what it is busy with now
    started: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    models: dict[str, tuple[float, float | None]] = field(default_factory=dict)  # name -> (started, finished)
    clock: Any = time.monotonic

    def advance(self, evaluator: str, n: int = 1) -> None:
        self.done[evaluator] = self.done.get(evaluator, 0) + n

    def report(self, stage: str, what: str, n: int) -> None:
        """An evaluator's progress callback: outputs done, or the step it is on."""
        if what == "outputs":
            self.advance(stage, n)
        elif what.startswith("model "):
            name = what.removeprefix("model ")
            if name.endswith(" done"):
                name = name.removesuffix(" done")
                self.models[name] = (self.models.get(name, (self.clock(), None))[0], self.clock())
            else:
                self.models[name] = (self.clock(), None)
                self.steps[stage] = f"{name} model"
        else:
            self.steps[stage] = what

    def begin(self, stage: str, step: str = "") -> None:
        if self.stage is not None and self.stage != stage:
            self.end(self.stage)
        if stage not in self.stages:
            self.stages.append(stage)
        self.stage = stage
        self.started.setdefault(stage, self.clock())
        if step:
            self.steps[stage] = step

    def end(self, stage: str) -> None:
        self.finished.setdefault(stage, self.clock())
        self.steps.pop(stage, None)
        if self.stage == stage:
            self.stage = None
