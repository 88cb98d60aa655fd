"""What the CLI shows a person: live progress, the dry-run plan, the final summary.

Progress: on a terminal, a live display (rich) with a line per stage -- read, fetch, each evaluator, write --
its counts (each part of an evaluator counted as it finishes outputs) and the ETA of the run's judge work (a model of
the work left, ``core.eta``: "ETA unknown (why)" whenever the model cannot support a number; a stage without judge
work at its own observed rate), the latest line of each event kind (judge health), the judge's calls by task with
retries and cost so far, and the local models at work. Elsewhere (CI, pipes) plain log lines: one when a stage starts
and a status line every 15 s. Either way judge retries are tallied into that status (never a line per retry),
third-party progress bars are switched off, and an unreachable judge ends with the CLI's one error line (the breaker's
own line is held back). With -v every retry line shows as well.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TextIO

from open_rag_eval.core.progress import Count, Event, Progress
from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.cli.terminal import echo

if TYPE_CHECKING:
    from open_rag_eval.config import LoadedConfig
    from open_rag_eval.core.eta import Lag
    from open_rag_eval.evaluators.base import Plan
    from open_rag_eval.run.pipeline import RunReport
    from open_rag_eval.core.types import RAGOutput

__all__ = ["ProgressDisplay", "print_plan", "print_summary", "quiet_third_party"]

log = logging.getLogger("open_rag_eval")

SIMULATED = "SIMULATED JUDGE: these scores come from the loopback simulated judge and mean nothing about a real system"
QUIET_ENV = {"TQDM_DISABLE": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TRANSFORMERS_VERBOSITY": "error",
             "TOKENIZERS_PARALLELISM": "false"}


def _out(text: str = "") -> None:
    echo(text)


def _money(value: float | None, usage_unknown: int = 0) -> str:
    if value is None and usage_unknown:
        return f"unknown ({usage_unknown} replies reported no valid token usage)"
    return "unknown (no price for this model; set judge.prices)" if value is None else f"${value:.4f}"


def quiet_third_party() -> Callable[[], None]:
    """Switch off the progress bars and advisory warnings of tqdm, huggingface_hub and transformers (before they
    are imported; a variable the user set is kept); Python warnings go to the log at ERROR unless -v. Returns
    the function that undoes it."""
    import warnings

    saved = {name: os.environ.get(name) for name in QUIET_ENV}
    for name, value in QUIET_ENV.items():
        os.environ.setdefault(name, value)
    shown, py_warnings = warnings.showwarning, logging.getLogger("py.warnings")
    level = py_warnings.level
    logging.captureWarnings(True)
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        py_warnings.setLevel(logging.ERROR)

    def undo() -> None:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        py_warnings.setLevel(level)
        if warnings.showwarning is not shown:
            logging.captureWarnings(False)

    return undo


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds + 0.5), 60)
    return f"{minutes}m{secs:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


class RetryTally(logging.Filter):
    """Takes the judge's per-retry log lines out of the log and counts them (and holds back the breaker's line,
    which the CLI's final error line restates)."""

    def __init__(self, *, verbose: bool = False) -> None:
        super().__init__()
        self.verbose = verbose  # -v: every line still shows (and is counted)
        self.total = 0
        self.since_status = 0
        self.last = ""
        self.tripped: logging.LogRecord | None = None

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("open_rag_eval.judge"):
            return True
        message = record.getMessage()
        if record.levelno <= logging.INFO and "; retry " in message:
            if getattr(record, "_retry_counted", False):  # one record, seen by each handler: count it once
                return self.verbose
            record._retry_counted = True  # type: ignore[attr-defined]
            self.total += 1
            self.since_status += 1
            self.last = message.split("; retry ", 1)[0].removeprefix("judge: ")
            return self.verbose
        if message.startswith("judge endpoint unavailable") and not self.verbose:
            self.tripped = record
            return False
        return True


class _ConsoleStream:
    """A log handler's stream while the live display runs: lines print above the display."""

    def __init__(self, console: Any) -> None:
        self.console = console

    def write(self, text: str) -> int:
        for line in text.rstrip("\n").split("\n"):
            if line:
                self.console.print(line, markup=False, highlight=False, emoji=False, soft_wrap=True)
        return len(text)

    def flush(self) -> None:
        return None


class ProgressDisplay:
    """The progress of a run: live on a terminal, plain lines elsewhere (see the module docstring)."""

    def __init__(self, progress: Progress, stream: TextIO, *, tty: bool | None = None, width: int | None = None,
                 interval: float = 15.0, clock: Callable[[], float] = time.monotonic, lag: Lag | None = None) -> None:
        self.progress, self.stream = progress, stream
        self.lag = lag  # how long this process waits for a CPU (the ETA's check of a busy machine); started on enter
        self.tty = stream.isatty() if tty is None else tty
        self.width, self.interval, self.clock = width, interval, clock
        self.tally = RetryTally()
        self.started = clock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Any = None
        self._handlers: list[tuple[logging.Handler, Any]] = []
        self._undo_quiet: Callable[[], None] = lambda: None
        self._judge_snapshot: dict[str, Any] | None = None
        self._events_shown: dict[str, Event] = {}

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> ProgressDisplay:
        from open_rag_eval.core.eta import Lag

        self.lag = self.lag or Lag().start()
        self._undo_quiet = quiet_third_party()
        self.tally.verbose = logging.getLogger().getEffectiveLevel() <= logging.DEBUG
        console = None
        if self.tty:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self.stream, width=self.width, force_terminal=True, highlight=False)
            self._live = Live(self, console=console, refresh_per_second=4, transient=False,
                              redirect_stdout=False, redirect_stderr=False)
        for handler in logging.getLogger().handlers:
            handler.addFilter(self.tally)
            stream = getattr(handler, "stream", None)
            self._handlers.append((handler, stream))
            if console is not None and stream in (sys.stderr, self.stream) and hasattr(handler, "setStream"):
                handler.setStream(_ConsoleStream(console))  # type: ignore[attr-defined]
        if self._live is not None:
            self._live.start()
        else:
            self._thread = threading.Thread(target=self._plain_loop, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        from open_rag_eval.core.errors import JudgeUnavailable

        self._stop.set()
        if self.lag is not None:
            self.lag.stop()
        if self._thread is not None:
            self._thread.join()
        if self._live is not None:
            if kind is not None and self.progress.stage == "read":
                self._live.transient = True  # a config or input error stands alone
            self._live.refresh()
            self._live.stop()
        for handler, stream in self._handlers:
            handler.removeFilter(self.tally)
            if stream is not None and hasattr(handler, "setStream"):
                handler.setStream(stream)  # type: ignore[attr-defined]
        self._undo_quiet()
        if self._live is None and kind is None:
            self.log_events()
            log.info("%s", self.status_line(final=True))
        if self.tally.tripped is not None and not isinstance(error, JudgeUnavailable):
            logging.getLogger(self.tally.tripped.name).handle(self.tally.tripped)

    def _plain_loop(self) -> None:
        shown_stage, last = None, self.clock()
        while not self._stop.wait(0.5):
            now = self.clock()
            stage = self.progress.stage
            if stage == "read" and now - self.started < self.interval:
                continue  # a config or input error is the run's one line; a long read still gets its status
            self.log_events()
            if stage != shown_stage and stage is not None:
                shown_stage, last = stage, now
                log.info("%s", self.status_line())
            elif now - last >= self.interval or (self.tally.since_status and now - last >= self.interval / 3):
                last = now
                log.info("%s", self.status_line())

    def log_events(self) -> None:
        """Plain lines: each new event once (a warning at WARNING level), not repeated in every status line."""
        for event in list(self.progress.events.values()):
            if self._events_shown.get(event.kind) != event:
                self._events_shown[event.kind] = event
                log.log(logging.WARNING if event.level == "warning" else logging.INFO, "%s: %s", event.kind, event.text)

    # ------------------------------------------------------------------ what is shown

    def _judge(self) -> dict[str, Any] | None:
        accounting = getattr(self.progress.judge, "accounting", None)
        if accounting is None:
            return self._judge_snapshot
        try:
            self._judge_snapshot = accounting.snapshot()
        except RuntimeError:  # a counter dict changed size under us: keep the last snapshot
            pass
        return self._judge_snapshot

    def _cost(self, total: dict[str, Any]) -> str:
        if getattr(self.progress.judge, "simulated", False):
            return "no cost (simulated judge)"
        cost = total.get("cost_usd")
        return "cost unknown (no price)" if cost is None else f"${cost:.4f} so far"

    def judge_line(self, *, since_last: bool = False) -> str | None:
        snapshot = self._judge()
        if not snapshot:
            return None
        total = snapshot["total"]
        asked = total["calls"] + total["cache_hits"]
        parts = [f"{asked} requests ({total['calls']} calls, {total['cache_hits']} cached)"]
        tasks = sorted(snapshot["tasks"].items(), key=lambda item: -(item[1]["calls"] + item[1]["cache_hits"]))
        if tasks:
            parts.append(", ".join(f"{name} {row['calls'] + row['cache_hits']}" for name, row in tasks))
        if total.get("failures"):
            parts.append(f"{total['failures']} failed")
        if self.tally.total:
            recent = f", {self.tally.since_status} since the last line" \
                if since_last and self.tally.since_status else ""
            parts.append(f"{self.tally.total} retries{recent} (last: {self.tally.last})")
        parts.append(self._cost(total))
        return " · ".join(parts)

    def models_line(self, now: float) -> str | None:
        models = self.progress.models
        if not models:
            return None
        return " · ".join(f"{name} running {_duration(now - start)}" if end is None
                          else f"{name} done in {_duration(end - start)}" for name, (start, end) in models.items())

    def stage_detail(self, stage: str, now: float) -> str:
        p = self.progress
        start, end = p.started.get(stage), p.finished.get(stage)
        step = p.steps.get(stage, "")
        if stage in p.done or stage in p.parts or (stage not in ("read", "fetch", "write") and start is not None):
            done, total = p.done.get(stage, 0), p.outputs_total
            text = f"{done}/{total} outputs"
            if end is not None:
                return f"{text} in {_duration(end - (start or end))}"
            parts = p.parts.get(stage, {})
            if parts:
                text += "".join(f" · {name} {count.done}/{total}" for name, count in parts.items())
            else:
                rate = p.counts.get(stage, Count()).rate(now)
                text += f" · {rate:.1f}/s" if rate else ""
            if total > done:
                text += f" · {self.eta(stage, now)}"
            return f"{text}{' · ' + step if step else ''}"
        if end is not None:
            return f"done in {_duration(end - (start or end))}"
        if start is not None:
            return f"{step or 'working'} ({_duration(now - start)})"
        return "waiting"

    def eta(self, stage: str, now: float) -> str:
        """The run's time left (``core.eta``): the judge work still planned, in waves of the requests the judge runs
        at once at the latency it has now, checked against the judge's observed pace; "ETA unknown" with why,
        whenever the model cannot support a number. A stage without judge work goes at its own observed rate."""
        from open_rag_eval.core.eta import BUSY, PACE_SWING, PACE_WAVES, blend, estimate, paced, requests_per_wave

        p, judge = self.progress, self.progress.judge
        work = p.work
        if judge is None or (work is not None and stage not in work.stages):
            local = p.eta(stage, now)
            return "ETA measuring" if local is None else f"ETA {_duration(local)}"
        running = [name for name, (_, end) in p.models.items() if end is None]
        timing, snapshot = getattr(judge, "timing", None), self._judge()
        since = p.work_known or 0.0
        latency = timing.latency(now, since=since) if timing is not None and work is not None else None
        why = ("planning" if work is None else f"{running[0]} model running" if running
               else "timing the judge" if latency is None or snapshot is None else "")
        if why:
            return f"ETA unknown ({why})"
        assert latency is not None and snapshot is not None and timing is not None
        made = {task: (row["calls"], row["cache_hits"]) for task, row in snapshot["tasks"].items()}
        after, flight = len(work.stages[work.stages.index(stage) + 1:]), timing.ages(now)
        pending = getattr(judge, "pending", 0)
        pending = pending if isinstance(pending, int) else 0
        capacity = requests_per_wave(judge, latency)
        model = estimate(work, made, latency, capacity, flight=flight, pending=pending, stages_left=after)
        if model is None or capacity is None:
            return "ETA unknown (the judge's concurrency)"
        pace = timing.pace(round(PACE_WAVES * capacity), now, since=since)
        if pace is None or not pace.rate:  # the model alone swings with the last replies on a loaded machine
            return "ETA unknown (timing the judge)"
        if pace.swing > PACE_SWING:
            return "ETA unknown (pace varies)"
        waiting = self.lag.waiting() if self.lag is not None else None
        if waiting is not None and waiting > BUSY:
            return f"ETA unknown (busy machine: {waiting:.0%} waiting for a CPU)"
        left = blend(model, paced(work, made, latency, pace.rate, in_flight=len(flight), pending=pending,
                                  stages_left=after))
        if left is None:
            return "ETA unknown (pace changing)"
        if left <= 0:
            return "ETA unknown (past the planned judge work)"
        return "ETA <1s" if left < 1 else f"ETA {_duration(left)}"  # tenths of a second are noise on a screen

    def stage_rows(self, now: float) -> list[tuple[str, str, str]]:
        """(mark, stage, detail) per stage: ✓ finished, ▸ running, · waiting."""
        p = self.progress
        stages = p.stages or ([p.stage] if p.stage else [])
        rows = []
        for stage in stages:
            mark = "✓" if stage in p.finished else "▸" if stage == p.stage else "·"
            rows.append((mark, stage, self.stage_detail(stage, now)))
        return rows

    def status_line(self, *, final: bool = False) -> str:
        """One plain line (CI, pipes): elapsed, the running stage, the judge; retries since the last line."""
        now = self.clock()
        p = self.progress
        head = f"[{_duration(now - self.started):>5}]"
        if final:
            parts = [f"{head} {p.outcome}"]
        elif p.stage is not None:
            parts = [f"{head} {p.stage}: {self.stage_detail(p.stage, now)}"]
        else:
            parts = [f"{head} starting"]
        judge = self.judge_line(since_last=True)
        if judge:
            parts.append(f"judge: {judge}")
        self.tally.since_status = 0
        return " | ".join(parts)

    def renderable(self, now: float | None = None) -> Any:
        """The live display (rich): a row per stage with a bar for evaluators, then the judge and the models."""
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        now = self.clock() if now is None else now
        p = self.progress
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=1)
        grid.add_column(min_width=11, no_wrap=True)
        grid.add_column(width=20)
        grid.add_column(ratio=1)
        for mark, stage, detail in self.stage_rows(now):
            bar: Any = ""
            if stage in p.done or stage in p.parts or (stage == p.stage and stage not in ("read", "fetch", "write")):
                total = max(p.outputs_total, 1)
                bar = ProgressBar(total=total, completed=min(p.completed(stage), total), width=20)
            style = "green" if mark == "✓" else "bold" if mark == "▸" else "dim"
            grid.add_row(Text(mark, style=style), Text(stage, style=style), bar, Text(detail))
        lines: list[Any] = [grid]
        for label, line in (("judge", self.judge_line()), ("models", self.models_line(now))):
            if line:
                lines.append(Text.assemble((f"  {label:<8}", "cyan"), line))
        for event in list(p.events.values()):
            style = "bold yellow" if event.level == "warning" else ""
            lines.append(Text.assemble((f"  {event.kind:<8}", "cyan"), (event.text, style)))
        lines.append(Text(f"  {'elapsed':<8}{_duration(now - self.started)}", style="dim"))
        return Group(*lines)

    def __rich__(self) -> Any:
        return self.renderable()


def measured_reask_rates(manifest_path: Path, model: str) -> dict[str, float] | None:
    """Extra replies per judgment, per task, in the run whose manifest this is (the judge-health counts), when that
    run used ``model``; None when there is no such run."""
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        tasks = (manifest.get("health") or {}).get("tasks") or {}
        if (manifest.get("judge") or {}).get("model") != model or not tasks:
            return None
        return {name: (row["replies"] - row["judgments"]) / row["judgments"]
                for name, row in tasks.items() if row.get("judgments")}
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def print_plan(loaded: LoadedConfig, outputs: Sequence[RAGOutput], plan: Plan, output_dir: Path | None = None) -> None:
    """The dry-run plan: calls and tokens per judge task, the re-asks to expect and their bound, the cost."""
    from open_rag_eval.judge.accounting import price_for

    judge = loaded.judge
    total, tasks = plan.total(), plan.by_task()
    previous = (output_dir or loaded.resolve_path(loaded.config.output_dir)) / "manifest.json"
    rates = measured_reask_rates(previous, judge.model)
    expected = plan.expected_reasks(rates or {})
    _out(f"dry run: {len(outputs)} outputs of {len({o.query_id for o in outputs})} queries; nothing was called")
    connector = loaded.config.connector
    if connector is not None and not outputs:
        _out(f"note: the outputs come from the connector when the run queries the system ({connector.repeats} "
             "run(s) per query of its queries file); their judge calls cannot be planned before they exist")
    _out(f"planned judge calls: {total.calls} (identical requests once; before cache hits)")
    width = max((len(name) for name in tasks), default=4)
    for name, task in tasks.items():
        _out(f"  {name:<{width}}  {task.calls:>7,} calls  {task.prompt_tokens:>11,} prompt  "
             f"{task.completion_tokens:>9,} completion tokens")
    _out(f"estimated tokens: {total.prompt_tokens} prompt, {total.completion_tokens} completion "
         "(replies of the size each method asks for)")
    if rates is not None:
        _out(f"expected re-asks: {expected.calls} calls, {expected.prompt_tokens} prompt tokens, at the rates "
             f"{judge.model} needed in the last run in {previous.parent.name}/ (included in the cost)")
    if total.reask_calls:
        _out(f"re-asks: {'none planned' if rates is None else 'beyond those expected'}; replies that do not parse "
             f"add at most {total.reask_calls} calls and {total.reask_prompt_tokens} prompt tokens")
    price = price_for(judge.model, judge.prices)

    def cost(prompt: int, completion: int) -> float | None:
        return None if price is None else (prompt * price.input + completion * price.output) / 1e6

    estimate = cost(total.prompt_tokens + expected.prompt_tokens, total.completion_tokens + expected.completion_tokens)
    shown = "none (simulated judge)" if judge.simulated is not None else _money(estimate)
    if judge.simulated is None and estimate is not None and total.reask_calls:
        share = total.reask_prompt_tokens / max(total.prompt_tokens, 1)
        worst = cost(total.prompt_tokens + total.reask_prompt_tokens, round(total.completion_tokens * (1 + share)))
        shown += f" (at most {_money(worst)} with every re-ask)"
    _out(f"estimated cost with {judge.model}: {shown}")
    for note in plan.notes:
        _out(f"note: {note}")


def print_summary(report: RunReport, *, every_metric: bool = False) -> None:
    """What a run found, in the report's order: the headline (met, near, below), the coverage, the judge (its
    calls, its health), the diagnosis; then every metric's row with ``every_metric`` (``-v``), else where they are."""
    if report.info.simulated:
        _out(SIMULATED)
    figures = _read_run(report)
    _headline(report)
    _coverage(figures)
    _accounting_line(report.manifest.get("accounting"), report.info)
    _health(report)
    _diagnosis(report, figures)
    _metric_table(report, every_metric or not _headline_of(report))
    _out(f"results: {report.output_dir} (results.csv, summary.csv, results.json, manifest.json, report.html)")
    if report.info.simulated:
        _out(SIMULATED)


def _headline_of(report: RunReport) -> list[str]:
    """The run's headline metrics (none: e.g. a custom evaluator's run, whose table is then printed whole)."""
    from open_rag_eval.report.headline import headline_metrics, report_options

    return headline_metrics([a.metric for a in report.summary], report_options(report.manifest)[0])


def _metric_table(report: RunReport, shown_all: bool) -> None:
    """Every metric's mean, CI, n and missing values (``-v``, or a run without headline metrics), else one line
    saying where they are."""
    from open_rag_eval.health.check import is_health
    from open_rag_eval.core.catalogue import is_dispersion

    shown = [a for a in report.summary if not is_dispersion(a.metric) and not is_health(a.metric)]
    if not shown_all:
        _out(f"all {len(shown)} metrics with their CIs: summary.csv and report.html (-v prints them here)")
        return
    width = max((len(a.metric) for a in shown), default=10)
    _out(f"{'metric':<{width}}  {'mean':>8}  {'95% CI':>19}  {'n':>5}  {'missing':>7}")
    for a in shown:
        mean = "" if a.mean is None else f"{a.mean:.4f}"
        ci = "" if a.ci95_low is None else f"[{a.ci95_low:.4f}, {a.ci95_high:.4f}]"
        missing = a.n_failed + a.n_undefined + a.n_unavailable + a.n_skipped
        _out(f"{a.metric:<{width}}  {mean:>8}  {ci:>19}  {a.n:>5}  {missing:>7}")
    hidden = sum(1 for a in report.summary if is_dispersion(a.metric))
    if hidden:
        _out(f"(and {hidden} per-query dispersion statistics across runs: see summary.csv)")
    _out("missing: values that failed, are undefined (a spread over one run, alpha with no variation), were "
         "skipped (too few runs) or are unavailable here; summary.csv and report.html count each kind apart")


def _health(report: RunReport) -> None:
    """The judge-health table; an unhealthy judge is also logged as a warning (stderr) so it cannot scroll by."""
    if report.health is None:
        return
    from open_rag_eval.health.text import health_lines

    for line in health_lines(report.health):
        _out(line)
    for problem in report.health.problems:
        log.warning("JUDGE UNHEALTHY: %s", problem)


def _diagnosis(report: RunReport, figures: _RunFigures) -> None:
    """The diagnosis rules over the run's means (the report's Diagnosis section says the same)."""
    from open_rag_eval.diagnosis import diagnose, diagnosis_lines, options_from_manifest
    from open_rag_eval.diagnosis.trec import adjusted_means

    means = adjusted_means({a.metric: a.mean for a in report.summary}, figures.answered, figures.refusals)
    found = diagnose(means, options_from_manifest(report.manifest), health=report.manifest.get("health"),
                     unavailable=figures.unavailable_reasons)
    for line in diagnosis_lines(found):
        _out(line)


@dataclass
class _RunFigures:
    """What the console's summary reads of results.json, item by item: the coverage the report's header shows
    (outputs with no failed value, missing values by kind over every item, unavailable metrics) and the no-answer
    tally of the diagnosis."""

    outputs: int = 0
    scored: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    unavailable: int = 0
    unavailable_reasons: dict[str, str] = field(default_factory=dict)  # metric -> the majority's reason, counted
    answered: list[float] = field(default_factory=list)
    refusals: int = 0
    shaky: dict[str, list[str]] = field(default_factory=dict)  # metric -> the unhealthy judge tasks it rests on
    resting: int = 0  # outputs holding a value of a shaky metric
    resting_full: int = 0  # those of them with no failed value


def _read_run(report: RunReport) -> _RunFigures:
    """``_RunFigures`` of the run's results.json, read item by item (a large run is not held in memory)."""
    from open_rag_eval.core.missing import FAILED, Missing
    from open_rag_eval.diagnosis.trec import tally_answered
    from open_rag_eval.health.rests import unhealthy_metrics
    from open_rag_eval.report.drilldown import missing_counts
    from open_rag_eval.store.json_items import read_items

    figures, missing = _RunFigures(), Missing(())
    figures.shaky = unhealthy_metrics([a.metric for a in report.summary], report.manifest.get("health"))

    def take(section: str, item: dict[str, Any]) -> None:
        missing.add(item)
        counts = missing_counts([item])
        for which, n in counts.items():
            figures.counts[which] = figures.counts.get(which, 0) + n
        if section == "outputs":
            figures.outputs += 1
            figures.scored += counts[FAILED] == 0
            figures.refusals += tally_answered(item, figures.answered)
            scores = item.get("scores") or {}
            if any(scores.get(metric) is not None for metric in figures.shaky):
                figures.resting += 1
                figures.resting_full += counts[FAILED] == 0

    read_items(report.output_dir / "results.json", take)
    figures.unavailable_reasons = missing.unavailable
    figures.unavailable = len(figures.unavailable_reasons)
    return figures


def _coverage(figures: _RunFigures) -> None:
    """The report header's coverage line: outputs fully scored, missing values by kind, metrics unavailable."""
    from open_rag_eval.core.missing import FAILED, SKIPPED, UNDEFINED

    if not figures.outputs:
        return
    counts = figures.counts
    skipped = f" · {counts.get(SKIPPED, 0)} skipped" if counts.get(SKIPPED) else ""
    scored = f"{figures.scored} / {figures.outputs} outputs fully scored"
    if figures.shaky:  # as the report's header: outputs resting on an unhealthy judge task counted apart
        tasks = ", ".join(dict.fromkeys(t for found in figures.shaky.values() for t in found))
        scored = (f"{figures.scored - figures.resting_full} / {figures.outputs} outputs fully scored on a healthy "
                  f"judge ({figures.resting} hold values from an unhealthy judge task, {tasks}: counted apart)")
    _out(f"coverage: {scored} · {counts.get(FAILED, 0)} failed · {counts.get(UNDEFINED, 0)} undefined{skipped} · "
         f"{figures.unavailable} metrics unavailable")


def _headline(report: RunReport) -> None:
    """The numbers to look at first (the report's headline panel): value, CI, the corrected value when the run has
    people's labels, direction, target."""
    from open_rag_eval.report.headline import headline_metrics, report_options, status, target_for
    from open_rag_eval.health.rests import UNHEALTHY, unhealthy_metrics
    from open_rag_eval.core.missing import kind
    from open_rag_eval.core.catalogue import lower_is_better

    stats = {a.metric: a for a in report.summary}
    chosen, targets = report_options(report.manifest)
    metrics = headline_metrics(list(stats), chosen)
    if not metrics:
        return
    shaky = unhealthy_metrics(metrics, report.manifest.get("health"))
    fixed = _corrected_cells(report.output_dir, metrics)
    width, fixed_width = max(len(m) for m in metrics), max((len(c) for c in fixed.values()), default=0)
    _out("headline (the numbers to look at first; report.html shows them with their distributions):")
    for metric in metrics:
        a = stats[metric]
        arrow = "↓" if lower_is_better(metric) else "↑"
        target = target_for(metric, targets)
        if a.mean is None:
            reason = report.reasons.get(metric)
            which = kind(reason) if reason else "missing"
            count = {"failed": a.n_failed, "undefined": a.n_undefined, "unavailable": a.n_unavailable,
                     "skipped": a.n_skipped}.get(which, a.n_failed)
            _out(f"  {metric:<{width}}  {'–':>7}  no value: {which} ({count} outputs; report.html says why)")
            continue
        ci = "" if a.ci95_low is None else f"[{a.ci95_low:.3f}, {a.ci95_high:.3f}]"
        corrected = f"  {fixed.get(metric, ''):<{fixed_width}}" if fixed else ""
        goal = ""
        if target is not None or metric in shaky:
            verdict = (f"{UNHEALTHY} ({', '.join(shaky[metric])})" if metric in shaky  # never "met" on a sick judge
                       else {"good": "met", "near": "near", "below": "below"}[status(metric, a.mean, target)])
            goal = f"target {'≤' if arrow == '↓' else '≥'} {target:g}: {verdict}" \
                if target is not None else verdict
        _out(f"  {metric:<{width}}  {a.mean:>7.3f}  {ci:<16}{corrected}  {arrow}  {goal}".rstrip())
    if fixed:
        _out("  corrected: the PPI++ mean with people's labels on n queries (docs/calibration.md); the target is "
             "judged on the judge's value")


def _corrected_cells(output_dir: Path, metrics: Sequence[str]) -> dict[str, str]:
    """metric -> "corrected x [lo, hi] (n labelled)" for the headline metrics a run with people's labels corrected
    (corrected.json); an unreadable file is said, never fatal (the results are written)."""
    from open_rag_eval.core.errors import InputError
    from open_rag_eval.report.data import read_json
    from open_rag_eval.run.corrected import CORRECTED_FILE

    try:
        rows = read_json(output_dir / CORRECTED_FILE).get("metrics") or []
    except InputError as error:
        log.warning("the headline shows no corrected values: %s", error)
        return {}
    return {r["metric"]: f"corrected {r['corrected_mean']:.3f} [{r['corrected_ci95_low']:.3f}, "
                         f"{r['corrected_ci95_high']:.3f}] ({r['n_labelled']} labelled)"
            for r in rows if isinstance(r, dict) and r.get("metric") in metrics and r.get("corrected_mean") is not None}


def _accounting_line(snapshot: dict[str, Any] | None, info: RunInfo) -> None:
    if not snapshot:
        return
    total = snapshot["total"]
    cost = "none (simulated judge)" if info.simulated else _money(total.get("cost_usd"), total.get("usage_unknown", 0))
    _out(
        f"judge: {total['calls']} calls, {total['cache_hits']} cache hits, {total['retries']} retries, "
        f"{total['failures']} failures, {total['prompt_tokens']} prompt + {total['completion_tokens']} completion "
        f"tokens, cost {cost}"
    )
