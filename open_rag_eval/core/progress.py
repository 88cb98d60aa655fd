"""Live counters of one run, written by the pipeline and the evaluators, read by the console's progress display.

Stages run in order: ``read`` (config and input), ``fetch`` (a connector asks the system), one per evaluator,
``write`` (results and report). An evaluator reports outputs done (``report(stage, "outputs", n)``), outputs
one of its parts has finished (``report(stage, "outputs umbrela", n)``: the console counts each part as it
finishes outputs, so a stage whose first whole output waits on a long chain of calls still shows its work), what
it is busy with between them (``report(stage, "ROUGE", 0)``) and the local models it runs
(``report(stage, "model HHEM", 0)`` when it starts, ``"model HHEM done"`` when it ends). Anything else worth a
line during the run is an :class:`Event` (``notify``): the console shows the latest of each kind, e.g. the
judge-health line (kind ``health``). No dependencies: the display imports this before anything heavy loads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Count", "Event", "Progress"]


@dataclass(frozen=True)
class Event:
    """A line for the console during the run; a newer event of the same kind replaces the older one.

    ``kind`` names the line (``health``: the judge-health line), ``text`` is the line itself, ``level`` says
    whether it is news (``info``) or a problem (``warning``: shown highlighted and logged as a warning)."""

    kind: str
    text: str
    level: Literal["info", "warning"] = "info"


@dataclass
class Count:
    """Outputs one stage (or one part of it) has finished, and when the first and the latest of them finished:
    the rate of a part is measured from its own first output, not from the start of its stage."""

    done: int = 0
    first: float | None = None
    last: float | None = None

    def add(self, n: int, now: float) -> None:
        if n <= 0:
            return
        self.done += n
        self.first = now if self.first is None else self.first
        self.last = now

    def rate(self, now: float, min_span: float = 1.0) -> float | None:
        """Outputs per second since the first finished, once at least two have and ``min_span`` s have passed;
        None before (a rate from one output, or from a burst a moment ago, would be a guess)."""
        if self.first is None or self.done < 2 or now - self.first < min_span:
            return None
        return (self.done - 1) / (now - self.first)


@dataclass
class Progress:
    """Live counters for a progress display."""

    outputs_total: int = 0
    done: dict[str, int] = field(default_factory=dict)  # stage (evaluator) -> outputs done
    parts: dict[str, dict[str, Count]] = field(default_factory=dict)  # stage -> part -> outputs it finished
    counts: dict[str, Count] = field(default_factory=dict)  # stage -> whole outputs done, with their times
    events: dict[str, Event] = field(default_factory=dict)  # kind -> the latest event of that kind
    judge: Any = None
    stages: list[str] = field(default_factory=list)  # every stage of the run, in order, once known
    stage: str | None = None  # the running stage
    steps: dict[str, str] = field(default_factory=dict)  # stage -> what it is busy with now
    started: dict[str, float] = field(default_factory=dict)
    finished: dict[str, float] = field(default_factory=dict)
    models: dict[str, tuple[float, float | None]] = field(default_factory=dict)  # name -> (started, finished)
    work: Any = None  # the run's judge work as planned (``core.eta.Workload``), once known: the time left
    work_known: float | None = None  # when it became known (the judge's latency is timed from then)
    clock: Any = time.monotonic
    outcome: str = "done"  # the final status line's word: "incomplete" for a run that cannot speak for a metric

    def advance(self, evaluator: str, n: int = 1) -> None:
        self.done[evaluator] = self.done.get(evaluator, 0) + n
        self.counts.setdefault(evaluator, Count()).add(n, self.clock())

    def report(self, stage: str, what: str, n: int) -> None:
        """An evaluator's progress callback: outputs done, outputs a part finished, or the step it is on."""
        if what == "outputs":
            self.advance(stage, n)
        elif what.startswith("outputs "):
            part = what.removeprefix("outputs ")
            self.parts.setdefault(stage, {}).setdefault(part, Count()).add(n, self.clock())
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

    def planned(self, work: Any) -> None:
        """The run's judge work is planned (from the planning thread): the console's time left rests on it."""
        self.work, self.work_known = work, self.clock()

    def notify(self, event: Event) -> None:
        """Show ``event`` during the run (replacing the previous event of its kind)."""
        self.events[event.kind] = event

    def completed(self, stage: str) -> float:
        """Outputs done in ``stage``, counting each part's share: what its progress bar shows."""
        parts = self.parts.get(stage)
        if not parts:
            return float(self.done.get(stage, 0))
        return sum(min(c.done, self.outputs_total) for c in parts.values()) / len(parts)

    def eta(self, stage: str, now: float) -> float | None:
        """Seconds until ``stage`` has every output, from the observed rate of each of its parts (the slowest
        part decides); None while a part that is not finished has no rate yet."""
        total = self.outputs_total
        counts = list(self.parts.get(stage, {}).values()) or [self.counts.get(stage, Count())]
        waits = []
        for count in counts:
            if count.done >= total:
                continue
            rate = count.rate(now)
            if rate is None or rate <= 0:
                return None
            waits.append((total - count.done) / rate)
        return max(waits, default=0.0)

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
