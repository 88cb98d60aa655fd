"""The one run loop of every way of running (here, an executor's processes, merged shards): windows of outputs
and every evaluator's result on them, spilled and written as they come, with the judge-health controls asked once
per run beside them (``run.start``); then the run's result files and health report from the spill."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.errors import InputError
from open_rag_eval.core.notices import tallied
from open_rag_eval.core.progress import Progress
from open_rag_eval.core.recording import HealthRecorder, recording
from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.core.types import EvalResult, RAGOutput
from open_rag_eval.evaluators.base import Evaluator, check_answers
from open_rag_eval.health.check import HealthReport, assess
from open_rag_eval.health.live import LiveHealth
from open_rag_eval.judge.base import Judge
from open_rag_eval.run import start
from open_rag_eval.run.corrected import RunLabels
from open_rag_eval.run.evaluation import evaluate_windows
from open_rag_eval.run.generation import Generation
from open_rag_eval.run.journal import JOURNAL_FILE
from open_rag_eval.run.memory import fixed_mmap_threshold, trim_heap
from open_rag_eval.run.results import spilled_run_status, write_spilled
from open_rag_eval.run.session import run_info
from open_rag_eval.run.source import OutputSource
from open_rag_eval.run.spill import SPILL_FILE, Spill
from open_rag_eval.run.status import RunStatus
from open_rag_eval.run.workload import plan_beside
from open_rag_eval.scoring.stats import Aggregate
from open_rag_eval.store.fileio import atomic_stream

__all__ = ["Ended", "Evaluated", "Executor", "OnWindow", "WindowedExecutor", "Windows", "check_rows", "run_loop"]


@dataclass
class Evaluated:
    """What an executor gives back: every evaluator's result in one, the judge as the manifest sees it (model,
    simulated, accounting summed over its processes) and the judge-health record."""

    result: EvalResult
    judge: Any
    recorder: HealthRecorder


class Executor(Protocol):
    """Evaluates a run's outputs in other processes or machines (``open_rag_eval.executors``); without one a run
    evaluates here, in this process."""

    async def evaluate(self, loaded: LoadedConfig, outputs: list[RAGOutput], progress: Progress) -> Evaluated: ...


@runtime_checkable
class WindowedExecutor(Protocol):
    """An executor that gives a run's results window by window (merged shards): each window's outputs and every
    evaluator's result on them, spilled as it comes; ``ended`` then gives the judge and the health record."""

    def windows(self, loaded: LoadedConfig, progress: Progress
                ) -> AsyncIterator[tuple[list[RAGOutput], list[EvalResult]]]: ...

    def ended(self) -> Evaluated: ...


@dataclass
class Ended:
    """What the run loop leaves for the manifest and the run's report."""

    summary: list[Aggregate]
    status: RunStatus
    reasons: dict[str, str]
    health: HealthReport | None
    info: RunInfo
    judge: Any  # the run's judge as the manifest sees it (an executor's: its processes' counters and the run's)


Windows = AsyncIterator[tuple[list[RAGOutput], list[EvalResult]]]
OnWindow = Callable[[list[RAGOutput], int | None], object]


async def run_loop(loaded: LoadedConfig, evaluators: list[Evaluator], source: OutputSource, judge: Judge | None,
                    executor: Executor | WindowedExecutor | None, generation: Generation, progress: Progress,
                    labels: RunLabels | None) -> Ended:
    """The one loop of every way of running: the run's windows (evaluated here, by an executor's processes, or
    merged from shards) are spilled and written as they come, and the judge-health controls are asked once,
    here, with the run's judge, from the run's first outputs (``FirstOutputs``, taken from the windows) beside the
    evaluation (``beside_first_stage``): every executor writes the local run's files and pays its calls."""
    fixed_mmap_threshold()  # large blocks in mappings of their own: the heap does not creep up window by window
    with generation.writing():
        spill = Spill(generation.path / SPILL_FILE)
    with spill:
        live = LiveHealth(progress.notify, loaded.judge.health)  # health shown during the run
        # every judgment recorded for the health report; a warning about many outputs is one line per kind for
        # the whole run (not per window)
        with recording(HealthRecorder(watch=live)) as recorder, tallied():
            finished, first = asyncio.Event(), start.FirstOutputs(start.CONTROL_OUTPUTS)
            # the console's time left: planned for a judge that times its requests (not a service's shared one,
            # whose runs nobody watches)
            planned = (lambda outputs: plan_beside(loaded, outputs, source.n_outputs, progress.planned,
                                                   judge)) if getattr(judge, "timing", None) else None
            checking = asyncio.ensure_future(start.beside_first_stage(
                judge, finished, first.ready, evaluators, loaded.judge.health, live.controls_done, planned))
            try:
                windows, ended = _windows(loaded, evaluators, source, judge, executor, generation, progress, first.add)
                cited = await _spill_windows(windows, spill, generation,
                                             loaded.judge.health if judge is not None else None)
                first.end()
                finished.set()
                controls = await checking
            finally:
                checking.cancel()
        check_rows(spill, source.n_outputs, loaded)
        evaluators.clear()  # their state (e.g. every query's nugget list) is not needed past here: memory
        seen: Any = judge
        evaluated = ended()
        if evaluated is not None:  # the executor's processes' judgments and counters, with the controls'
            recorder.merge([{task: vars(counts) for task, counts in evaluated.recorder.tasks.items()}])
            seen = _joined(evaluated.judge, judge)
        return _write(loaded, spill, generation, progress, seen, recorder, cited, controls, labels)


def _windows(loaded: LoadedConfig, evaluators: list[Evaluator], source: OutputSource, judge: Judge | None,
             executor: Executor | WindowedExecutor | None, generation: Generation, progress: Progress,
             on_window: OnWindow) -> tuple[Windows, Callable[[], Evaluated | None]]:
    """The run's windows (each handed to ``on_window`` as it is read) and, once they are done, what an executor
    gives back besides them (None: evaluated here)."""
    if executor is None:
        return evaluate_windows(evaluators, source, judge, output_dir=generation.path, base_dir=loaded.base_dir,
                          progress=progress, on_window=on_window), lambda: None
    if isinstance(executor, WindowedExecutor):
        return _seen(executor.windows(loaded, progress), on_window), executor.ended
    given: list[Evaluated] = []
    return _seen(_executed(executor, loaded, evaluators, source, progress, given), on_window), lambda: given[0]


async def _seen(windows: Windows, on_window: OnWindow) -> Windows:
    """``windows``, each handed to ``on_window`` as it comes (an executor's: evaluated elsewhere)."""
    async for window, parts in windows:
        on_window(window, len(window))
        yield window, parts


async def _executed(executor: Executor, loaded: LoadedConfig, evaluators: list[Evaluator], source: OutputSource,
                    progress: Progress, given: list[Evaluated]) -> Windows:
    """An executor that evaluates the whole run in other processes: one window, every output."""
    everything = source.all()
    check_answers(evaluators, everything)
    evaluated = await executor.evaluate(loaded, everything, progress)
    given.append(evaluated)
    yield everything, [evaluated.result]


def _joined(seen: Any, judge: Judge | None) -> Any:
    """An executor's judge as the manifest sees it, with the calls the run's own judge made (the controls)."""
    accounting = getattr(judge, "accounting", None)
    if seen is not None and seen.accounting is not None and accounting is not None:
        seen.accounting.absorb(accounting.snapshot())
    return seen


def _write(loaded: LoadedConfig, spill: Spill, generation: Generation, progress: Progress, judge: Any,
           recorder: HealthRecorder, cited: tuple[list[dict[str, Any]], int] | None,
           controls: dict[str, Any] | None, labels: RunLabels | None) -> Ended:
    """The run's result files from its spill, with the health report (None without a judge)."""
    progress.begin("write", "results")
    info = run_info(loaded, judge)
    health = _health(recorder, loaded.judge.health, cited, controls,
                     loaded.judge.structured or "text") if judge is not None else None
    with generation.writing():
        summary = write_spilled(generation.path, spill, info, health.summary_rows() if health else (), labels)
    status = spilled_run_status(summary, spill)
    reasons = {m: found.most_common(1)[0][0] for m, found in spill.reasons.items() if found}
    return Ended(summary, status, reasons, health, info, judge)


async def _spill_windows(windows: AsyncIterator[tuple[list[RAGOutput], list[EvalResult]]], spill: Spill,
                         generation: Generation, health: Any) -> tuple[list[dict[str, Any]], int] | None:
    """Each window, as it comes, to outputs.jsonl and the spill; the health report's citation figures counted
    window by window (None without ``health``); the C heap trimmed after each (``trim_heap``)."""
    low: list[dict[str, Any]] = []
    n_cited = 0
    with generation.writing(), atomic_stream(generation.path / JOURNAL_FILE) as journal:
        async for window, parts in windows:
            _write_outputs(journal, window)
            spill.add(window, parts)
            if health is not None:
                found = _cited([score for part in parts for score in part.scores], health)
                low += found[0]
                n_cited += found[1]
            del window, parts
            trim_heap()  # the window's free C heap pages back to the system: else RSS grows with the outputs
    return (low, n_cited) if health is not None else None


def check_rows(spill: Spill, n_outputs: int, loaded: LoadedConfig) -> None:
    """A run with no row at all (no output, and no evaluator gave rows of its own) is bad input, raised before
    anything is written: an empty table would read as a run that went well."""
    if n_outputs or spill.metrics:
        return
    given = loaded.config.input
    if given is not None:
        raise InputError("no output to evaluate: the input has no row", file=str(loaded.resolve_path(given)))
    if loaded.config.connector is not None:
        raise InputError("no output to evaluate: the system gave no output (is the queries file empty?)",
                         field="connector")
    raise InputError("no output to evaluate: no input, and no evaluator reads rows of its own (e.g. golden with "
                     "run: and qrels:)", field="input")


def _cited(scores: Sequence[Any], thresholds: Any) -> tuple[list[dict[str, Any]], int]:
    """The health report's outputs with few labelled citations, and its count of outputs that cite, for ``scores``."""
    part = assess(HealthRecorder(), scores, thresholds)
    return part.low_labelled, part.n_cited_outputs


def _health(recorder: HealthRecorder, thresholds: Any, cited: tuple[list[dict[str, Any]], int] | None,
            controls: dict[str, Any] | None, reply_format: str) -> HealthReport:
    """The health report of a run whose citation figures were counted window by window (``_cited``)."""
    report = assess(recorder, (), thresholds, controls, reply_format)
    if cited is not None:
        report.low_labelled, report.n_cited_outputs = cited
    return report


def _write_outputs(handle: Any, outputs: Sequence[RAGOutput]) -> None:
    from open_rag_eval.inputs import output_to_json

    handle.write("".join(json.dumps(output_to_json(o), ensure_ascii=False) + "\n" for o in outputs))
