"""One evaluation run: outputs -> evaluators (sharing one judge) -> result files.

``arun`` is the async core; ``run`` is the one ``asyncio.run`` for the CLI and notebooks. A run writes one
complete generation of result files into a fresh folder beside the output folder and swaps it in at the end
(``store.generation``); until then the previous results stay as they were, and a second run on the same folder is
refused (a lock). Judged work lives in the judge's cache as soon as it is judged, and a connector's outputs in the
fresh folder as soon as they are fetched, so a run that stops (crash, outage, Ctrl-C) resumes by running it again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast, runtime_checkable

from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.errors import ConfigError, InputError
from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.evaluators.base import Context, Evaluator, Plan, check_answers, needs_judge, window_safe
from open_rag_eval.health.check import HealthReport, assess
from open_rag_eval.core.recording import HealthRecorder, recording
from open_rag_eval.health.live import LiveHealth
from open_rag_eval.judge.base import Judge
from open_rag_eval.judge.config import JudgeConfig, is_simulated_fingerprint
from open_rag_eval.run.controls import plan_controls, run_controls_of
from open_rag_eval.run.corrected import RunLabels, run_labels
from open_rag_eval.run.manifest import build_manifest
from open_rag_eval.core.notices import tallied
from open_rag_eval.core.progress import Progress
from open_rag_eval.run.results import spilled_run_status, write_spilled
from open_rag_eval.run.source import (
    WINDOW_OUTPUTS,
    CsvSource,
    JsonlSource,
    ListSource,
    OutputSource,
    Spool,
    SpooledSource,
    contiguous,
    query_groups,
)
from open_rag_eval.run.spill import SPILL_FILE, Spill
from open_rag_eval.run.status import RunStatus
from open_rag_eval.store.fileio import atomic_stream
from open_rag_eval.scoring.stats import Aggregate, preload as preload_numpy
from open_rag_eval.run.checks import check_inputs_outside, output_folder
from open_rag_eval.run.generation import Generation
from open_rag_eval.run.journal import IDENTITY_FILE, JOURNAL_FILE, RESUME_FILES
from open_rag_eval.run.workload import plan_beside
from open_rag_eval.core.types import Detail, EvalResult, RAGOutput, Score

__all__ = ["Evaluated", "Executor", "WindowedExecutor", "Progress", "RunReport", "arun", "context_notes",
           "check_rows", "evaluate_all", "judge_session", "load_outputs", "open_source", "or_empty", "own_rows",
           "plan", "read_result", "run", "run_info", "windowed"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")


class RunReport:
    """What a run gives back besides its files: the summary, the manifest, whether it is incomplete, judge health.

    ``result`` and ``outputs`` are read back from the run's files when first asked for (they hold every output: a
    large run streams its files instead); ``outputs`` are those given, or a connector's as it gave them when there
    are at most ``CONTROL_OUTPUTS`` (a larger run's are read back from its outputs.jsonl); ``reasons``: the first
    reason of each metric without any value."""

    def __init__(self, result: EvalResult | None, summary: list[Aggregate], output_dir: Path,
                 manifest: dict[str, Any], info: RunInfo, outputs: list[RAGOutput] | None = None,
                 incomplete: list[dict[str, Any]] | None = None, health: HealthReport | None = None,
                 reasons: dict[str, str] | None = None) -> None:
        self._result, self._outputs = result, outputs
        self.summary, self.output_dir, self.manifest, self.info = summary, output_dir, manifest, info
        self.incomplete = incomplete or []  # judged metrics that failed for every output
        self.health = health  # None when no judge was used
        self.reasons = reasons if reasons is not None else _first_reasons(result, summary)

    @property
    def status(self) -> RunStatus:
        """Complete, or incomplete with its reasons (``run.status``)."""
        no_value = self.manifest.get("no_value")
        return RunStatus(tuple(self.incomplete), str(no_value) if no_value is not None else None)

    @property
    def result(self) -> EvalResult:
        if self._result is None:
            self._result = read_result(self.output_dir)
        return self._result

    @property
    def outputs(self) -> list[RAGOutput]:
        if self._outputs is None:
            from open_rag_eval.inputs.jsonl import read_jsonl_outputs

            path = self.output_dir / JOURNAL_FILE
            self._outputs = read_jsonl_outputs(path) if path.is_file() and path.stat().st_size else []
        return self._outputs


def _first_reasons(result: EvalResult | None, summary: Sequence[Aggregate]) -> dict[str, str]:
    empty = {a.metric for a in summary if not a.n}
    reasons: dict[str, str] = {}
    for score in result.scores if result is not None and empty else ():
        if score.metric in empty and score.error:
            reasons.setdefault(score.metric, score.error)
    return reasons


def read_result(folder: Path) -> EvalResult:
    """A finished run's scores and details, read back from its results.json (output by output, then the queries),
    as a stream (``store.json_items``): memory holds the result, not the file's text or its JSON tree."""
    from open_rag_eval.store.json_items import read_items

    result = EvalResult()

    def on_item(section: str, item: dict[str, Any]) -> None:
        run = item.get("run") if section == "outputs" else None
        query_id = str(item.get("query_id"))
        for metric, value in (item.get("scores") or {}).items():
            result.scores.append(Score(query_id=query_id, run=run, metric=metric, value=value))
        for metric, error in (item.get("errors") or {}).items():
            result.scores.append(Score(query_id=query_id, run=run, metric=metric, error=error or "missing"))
        for name, data in (item.get("details") or {}).items():
            result.details.append(Detail(query_id=query_id, run=run, section=name, data=data))

    read_items(folder / "results.json", on_item)
    return result


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


def load_outputs(loaded: LoadedConfig, limit: int | None = None) -> list[RAGOutput]:
    """The outputs named by ``input:`` (connector outputs are fetched in ``arun``), cut to the first ``limit`` queries."""
    from open_rag_eval.inputs import read_outputs

    if loaded.config.input is None:
        return []
    return _limit(read_outputs(loaded.resolve_path(loaded.config.input)), limit)


def _limit(outputs: list[RAGOutput], limit: int | None) -> list[RAGOutput]:
    if _check_limit(limit) is None:
        return outputs
    kept = list(dict.fromkeys(o.query_id for o in outputs))[:limit]
    return [o for o in outputs if o.query_id in set(kept)]


def _check_limit(limit: int | None) -> int | None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a whole number of at least 1, got {limit!r}", path="--limit")
    return limit


REHEARSED_QUERIES = 200


def plan(loaded: LoadedConfig, outputs: Sequence[RAGOutput]) -> Plan:
    """The judge work of a run, evaluator by evaluator (an evaluator whose ``plan`` takes ``evaluators`` sees all
    of them, built, e.g. to reuse the trec evaluator's planned nugget lists).

    Beyond ``REHEARSED_QUERIES`` queries, a seeded random sample of that many queries (all their runs) is planned
    and its figures scaled by the ratio of outputs, so a dry run of a large input stays quick."""
    evaluators = [spec.build() for spec in loaded.evaluators]
    queries = list(dict.fromkeys(o.query_id for o in outputs))
    everything = outputs  # the controls are built from the whole run, as the run builds them
    scale, notes = 1.0, []
    if len(queries) > REHEARSED_QUERIES:
        chosen = set(random.Random(0).sample(queries, REHEARSED_QUERIES))
        sample = [o for o in outputs if o.query_id in chosen]
        scale = len(outputs) / len(sample)
        notes.append(f"planned on a random sample of {REHEARSED_QUERIES} of the {len(queries)} queries (seed 0, "
                     f"{len(sample)} of {len(outputs)} outputs), scaled by {scale:.2f}")
        outputs = sample
    total = Plan(notes=notes, scale=scale)
    for evaluator in evaluators:
        total = total + evaluator.plan(outputs, evaluators)
    total = total + plan_controls(evaluators, everything, loaded.judge.health)
    return total + Plan(notes=context_notes(total, loaded.judge.context_tokens))


def context_notes(planned: Plan, limit: int | None) -> list[str]:
    """The tasks whose requests cannot fit ``judge.context_tokens`` with the reply they need, named."""
    if limit is None:
        return []
    return [f"judge.context_tokens ({limit}): {over} of {n} {task} requests cannot fit with the reply the task needs; "
            "they will fail without a call" for task, (over, n) in planned.over_context(limit).items()]


def run(loaded: LoadedConfig, **kwargs: Any) -> RunReport:
    return asyncio.run(arun(loaded, **kwargs))


async def arun(
    loaded: LoadedConfig,
    *,
    output_dir: Path | None = None,
    limit: int | None = None,
    outputs: list[RAGOutput] | None = None,
    source: OutputSource | None = None,
    progress: Progress | None = None,
    executor: Executor | WindowedExecutor | None = None,
    wrap_judge: Callable[[Judge], Judge] | None = None,
    write_report: Callable[[Path], object] | None = None,
) -> RunReport:
    """``wrap_judge``: wraps the run's judge before any metric sees it (the service shares a judge profile fairly
    across its running jobs); the run's results do not depend on it. ``write_report``: draws the report into the new
    results folder before it replaces the previous one (the caller hands it down, e.g. ``report.write_report``;
    None: no report). ``source``: the outputs read elsewhere (merged shards), instead of ``outputs``."""
    started = time.monotonic()
    _check_limit(limit)
    out = output_folder(loaded, output_dir)
    evaluators = [spec.build() for spec in loaded.evaluators]
    check_inputs_outside(loaded, out)  # the new results must not replace an input
    labels = run_labels([loaded.resolve_path(p) for p in loaded.config.labels or ()])  # bad labels: before any call
    progress = progress or Progress()
    fetch = outputs is None and source is None and loaded.config.connector is not None
    progress.stages = list(dict.fromkeys([*progress.stages, "read", *(["fetch"] if fetch else []),
                                          *(e.name for e in evaluators), "write"]))
    progress.begin("read", "input")
    source = _given(loaded, evaluators, outputs, source, limit)  # bad input fails before anything is opened
    progress.steps["read"] = "opening the judge"
    with Generation(out, keep=RESUME_FILES if fetch else ()) as generation, fewer_collections():  # usable, ours
        # a missing API key fails before anything is written; the run's judge asks the controls, and evaluates
        # unless an executor's processes do (they open their own)
        async with _judge_for(loaded, needs_judge(evaluators)) as judge:
            if judge is not None and wrap_judge is not None:
                judge = wrap_judge(judge)
            if source is None:
                progress.begin("fetch", "asking the system")
                source = await _fetch_source(loaded, limit, generation.path)
                progress.outputs_total = progress.done["fetch"] = source.n_outputs
            progress.outputs_total = source.n_outputs
            progress.judge = judge
            ended = await _run_loop(loaded, evaluators, source, judge, executor, generation, progress, labels)
            manifest = build_manifest(loaded, (source.n_outputs, source.n_queries), ended.judge, ended.info,
                                      wall_time_s=time.monotonic() - started, input_sha256=source.input_sha256)
            manifest["health"] = ended.health.snapshot() if ended.health is not None else None
        manifest.update(ended.status.manifest_fields())
        given = source.all() if isinstance(source, ListSource) or (
            isinstance(source, SpooledSource) and source.n_outputs <= CONTROL_OUTPUTS) else None
        _publish(generation, manifest, write_report, progress)
    progress.end("write")
    return RunReport(None, ended.summary, out, manifest, ended.info, given, list(ended.status.incomplete),
                     ended.health, ended.reasons)


def _given(loaded: LoadedConfig, evaluators: Sequence[Evaluator], outputs: list[RAGOutput] | None,
           source: OutputSource | None, limit: int | None) -> OutputSource | None:
    """The run's outputs unless a connector fetches them (None): given, or opened from ``input:``. Bad input fails
    here, before anything is opened or written; outputs in memory without an answer a metric reads, too."""
    if source is None and outputs is not None:
        source = ListSource(outputs)
    if isinstance(source, ListSource):
        check_answers(evaluators, source.outputs)
    if source is None and loaded.config.connector is None:
        source = open_source(loaded, limit)
    return source


def _publish(generation: Generation, manifest: dict[str, Any], write_report: Callable[[Path], object] | None,
             progress: Progress) -> None:
    """The manifest and the report written into the new results folder, which then replaces the previous one."""
    with generation.writing():
        generation.write_json("manifest.json", manifest)
        generation.remove(IDENTITY_FILE)
        generation.remove(FETCHED_FILE)
        if write_report is not None:
            progress.steps["write"] = "report.html"
            release_memory()  # what evaluating and writing freed, before the report takes its own
            _write_report(write_report, generation.path)
    generation.commit()  # the new results replace the previous ones, all at once


@dataclass
class _Ended:
    """What the run loop leaves for the manifest and the run's report."""

    summary: list[Aggregate]
    status: RunStatus
    reasons: dict[str, str]
    health: HealthReport | None
    info: RunInfo
    judge: Any  # the run's judge as the manifest sees it (an executor's: its processes' counters and the run's)


Windows = AsyncIterator[tuple[list[RAGOutput], list[EvalResult]]]
OnWindow = Callable[[list[RAGOutput], int | None], object]


async def _run_loop(loaded: LoadedConfig, evaluators: list[Evaluator], source: OutputSource, judge: Judge | None,
                    executor: Executor | WindowedExecutor | None, generation: Generation, progress: Progress,
                    labels: RunLabels | None) -> _Ended:
    """The one loop of every way of running: the run's windows (evaluated here, by an executor's processes, or
    merged from shards) are spilled and written as they come, and the judge-health controls are asked once,
    here, with the run's judge, from the run's first outputs (``FirstOutputs``, taken from the windows) beside the
    evaluation (``_beside_first_stage``): every executor writes the local run's files and pays its calls."""
    with generation.writing():
        spill = Spill(generation.path / SPILL_FILE)
    with spill:
        live = LiveHealth(progress.notify, loaded.judge.health)  # health shown during the run
        # every judgment recorded for the health report; a warning about many outputs is one line per kind for
        # the whole run (not per window)
        with recording(HealthRecorder(watch=live)) as recorder, tallied():
            finished, first = asyncio.Event(), FirstOutputs(CONTROL_OUTPUTS)
            # the console's time left: planned for a judge that times its requests (not a service's shared one,
            # whose runs nobody watches)
            planned = (lambda outputs: plan_beside(loaded, outputs, source.n_outputs, progress.planned,
                                                   judge)) if getattr(judge, "timing", None) else None
            checking = asyncio.ensure_future(_beside_first_stage(
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
        return _evaluated(evaluators, source, judge, output_dir=generation.path, base_dir=loaded.base_dir,
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
           controls: dict[str, Any] | None, labels: RunLabels | None) -> _Ended:
    """The run's result files from its spill, with the health report (None without a judge)."""
    progress.begin("write", "results")
    info = run_info(loaded, judge)
    health = _health(recorder, loaded.judge.health, cited, controls,
                     loaded.judge.structured or "text") if judge is not None else None
    with generation.writing():
        summary = write_spilled(generation.path, spill, info, health.summary_rows() if health else (), labels)
    status = spilled_run_status(summary, spill)
    reasons = {m: found.most_common(1)[0][0] for m, found in spill.reasons.items() if found}
    return _Ended(summary, status, reasons, health, info, judge)


CONTROL_OUTPUTS = WINDOW_OUTPUTS  # the judge-health controls are drawn from the run's first window of outputs


async def _beside_first_stage(judge: Judge | None, finished: asyncio.Event, first: Awaitable[list[RAGOutput]],
                              evaluators: list[Any], thresholds: Any, done: Callable[[dict[str, Any] | None], None],
                              plan: Callable[[list[RAGOutput]], object] | None = None) -> dict[str, Any] | None:
    """The run's background work, begun once its first judge request is out (``_first_request``; ``finished``:
    the evaluation is over) so that none of it delays that request: numpy's import (the summary's bootstrap needs it
    at the end) and the judge-health controls, built from the run's first outputs (``first``: ``FirstOutputs``, from
    the windows the evaluation reads) and asked beside the evaluation; ``plan`` is handed the same outputs (the
    console's time left: the run's judge work, planned beside it)."""
    await _first_request(judge, finished)
    preload_numpy()
    outputs = await first
    if plan is not None:
        plan(outputs)
    return await run_controls_of(evaluators, outputs, judge, thresholds, done)


class FirstOutputs:
    """The outputs of a run's first whole queries, as many as fit in ``limit`` outputs (at least one query), as
    ``windows`` cuts them: taken from the evaluation's windows as they are read (``add``), never read again. With
    windows of at least ``limit`` outputs (the run's own) they are all in the first window; smaller windows (tests)
    give the same outputs a few windows later, so the controls do not depend on the size of the windows."""

    def __init__(self, limit: int) -> None:
        self.limit, self.outputs = limit, list[RAGOutput]()
        self.ready: asyncio.Future[list[RAGOutput]] = asyncio.get_running_loop().create_future()

    def add(self, window: list[RAGOutput], size: int | None) -> None:
        """One window of whole queries, of at most ``size`` outputs (None: the window is the whole run)."""
        if self.ready.done():
            return
        for group in query_groups(window):
            if self.outputs and len(self.outputs) + len(group) > self.limit:
                return self.end()
            self.outputs.extend(group)
        if size is None or size >= self.limit:  # the next window starts with a query that did not fit in ``size``
            self.end()

    def end(self) -> None:
        if not self.ready.done():
            self.ready.set_result(self.outputs)


async def _first_request(judge: Judge | None, evaluated: asyncio.Event) -> None:
    """Returns once ``judge`` has sent its first request (its ``asked``), or when the evaluation needed none
    (``evaluated``: all cached, no judge, or a judge that does not say)."""
    asked = getattr(judge, "asked", None)
    if not isinstance(asked, asyncio.Event):
        return
    waits = [asyncio.ensure_future(asked.wait()), asyncio.ensure_future(evaluated.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def open_source(loaded: LoadedConfig, limit: int | None = None) -> OutputSource:
    """The outputs named by ``input:``: a JSONL or CSV file streamed window by window, any other input read at once."""
    _check_limit(limit)
    if loaded.config.input is None:
        return ListSource([])
    path = loaded.resolve_path(loaded.config.input)
    streamed = {".jsonl": JsonlSource, ".csv": CsvSource}.get(path.suffix.lower())
    if streamed is not None:
        return streamed(path, limit)
    return ListSource(load_outputs(loaded, limit))



async def _evaluated(evaluators: list[Any], source: OutputSource, judge: Judge | None, *, output_dir: Path,
                     base_dir: Path, progress: Progress,
                     on_window: Callable[[list[RAGOutput], int | None], object] | None = None
                     ) -> AsyncIterator[tuple[list[RAGOutput], list[EvalResult]]]:
    """Each window of whole queries and every evaluator's result on it (one window when an evaluator must see the
    whole run); ``on_window`` is handed each window as it is read, and the windows' size (None: one window)."""
    whole = not all(windowed(e, source.fewest_answered) for e in evaluators)
    size = max(source.n_outputs, 1) if whole else WINDOW_OUTPUTS
    _say_one_window(evaluators, source, whole)
    for window in or_empty(source.windows(size), own_rows(evaluators)):
        if on_window is not None:
            on_window(window, None if whole else size)
        yield window, await evaluate_all(evaluators, window, judge, output_dir=output_dir, base_dir=base_dir,
                                         progress=progress)
        for evaluator in evaluators:
            evaluator.forget()  # what it kept of this window's queries (nugget lists): the next window has others


async def _spill_windows(windows: AsyncIterator[tuple[list[RAGOutput], list[EvalResult]]], spill: Spill,
                         generation: Generation, health: Any) -> tuple[list[dict[str, Any]], int] | None:
    """Each window, as it comes, to outputs.jsonl and the spill; the health report's citation figures counted
    window by window (None without ``health``)."""
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
    return (low, n_cited) if health is not None else None


def _say_one_window(evaluators: Sequence[Any], source: OutputSource, whole: bool) -> None:
    """A run larger than a window that is evaluated as one (memory grows with its outputs) says so, and why."""
    if source.n_outputs <= WINDOW_OUTPUTS:
        return
    why = [f"the {e.name} evaluator sees the whole run at once" for e in evaluators
           if not windowed(e, source.fewest_answered)] if whole else []
    scattered = isinstance(source, ListSource) and not contiguous(source.outputs)
    if scattered or getattr(source, "contiguous", True) is False:
        why.append("a query's outputs are not contiguous in the input (sort it by query_id to stream it)")
    if why:
        log.warning("evaluating the %d outputs as one window, every output in memory: %s", source.n_outputs,
                    "; ".join(why))


def own_rows(evaluators: Sequence[Evaluator]) -> bool:
    """Whether any of these evaluators scores rows of its own data (its contract's ``own_rows``: the golden
    evaluator's TREC run file), so a run of them has rows even when it has no output."""
    return any(e.contract().own_rows for e in evaluators)


def or_empty(windows: Iterable[_T], empty: bool) -> Iterator[_T]:
    """``windows``; when there is none and ``empty`` (an evaluator has rows of its own), one empty window, so
    that the evaluators still run once."""
    seen = False
    for window in windows:
        seen = True
        yield window
    if not seen and empty:
        yield cast(_T, [])


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


def windowed(evaluator: Evaluator, fewest_answered: int) -> bool:
    """Whether ``evaluator`` gives a run's results when it sees the run one window of whole queries at a time
    (its contract's ``window_runs``; ``fewest_answered``: the fewest answered runs of any query)."""
    return window_safe(evaluator, fewest_answered)


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


GC_THRESHOLDS = (50_000, 20, 100)
_gc_runs: list[tuple[int, int, int]] = []  # the thresholds before the first run still going


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Python's cyclic collector less often while outputs are evaluated: a large run holds hundreds of thousands
    of small objects, which the default thresholds scan again and again (a quarter of the CPU of a 1,000-output run;
    measured with ``bench/scale_bench.py``). Memory is unchanged: cycles are still collected, in larger batches.
    Overlapping runs (the service) restore the thresholds once, when the last of them ends."""
    if not _gc_runs:
        _gc_runs.append(gc.get_threshold())
        gc.set_threshold(*GC_THRESHOLDS)
    else:
        _gc_runs.append(_gc_runs[0])
    try:
        yield
    finally:
        saved = _gc_runs.pop()
        if not _gc_runs:
            gc.set_threshold(*saved)


def release_memory() -> None:
    """Collect the run's cyclic garbage (kept longer by ``fewer_collections``) and hand the C heap's free pages
    back to the system (glibc's ``malloc_trim``; elsewhere nothing): a 2,000-output run's RSS drops by a sixth
    before its report is drawn, so the report does not add its memory on top of the evaluation's."""
    gc.collect()
    import ctypes  # noqa: PLC0415 (only here)

    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


async def evaluate_all(evaluators: Sequence[Any], outputs: list[RAGOutput], judge: Judge | None, *,
                       output_dir: Path | None, base_dir: Path, progress: Progress | None = None,
                       previous: EvalResult | None = None, everyone: Sequence[Any] | None = None
                       ) -> list[EvalResult]:
    """Every evaluator on ``outputs``, in order (each sees the results of those before it, after ``previous``, and
    ``everyone``: the run's evaluators, built, default ``evaluators``): one result each."""
    check_answers(evaluators, outputs)  # an output without an answer, when a metric reads one
    parts: list[EvalResult] = []
    result = EvalResult(scores=list(previous.scores), details=list(previous.details)) if previous else EvalResult()
    for evaluator in evaluators:
        report: Any = progress.report if progress is not None else (lambda name, what, n: None)
        if progress is not None:
            progress.begin(evaluator.name)
        ctx = Context(
            judge=judge,
            previous=EvalResult(scores=list(result.scores), details=list(result.details)),
            output_dir=output_dir,
            evaluators=everyone if everyone is not None else evaluators,
            progress=_named(report, evaluator.name),
        )
        with tallied():  # a warning about many outputs is one line per kind
            part = await evaluator.evaluate(outputs, ctx)
        parts.append(part)
        result.extend(part)
    return parts


FETCHED_FILE = ".open-rag-eval-fetched"  # a connector's outputs spooled as they come, read back window by window


async def _fetch_source(loaded: LoadedConfig, limit: int | None, folder: Path) -> SpooledSource:
    """Query the live system through the configured connector (the first ``limit`` queries), saving them to the
    journal in ``folder`` and spooling them there, for the run to read back window by window."""
    from open_rag_eval.run.fetch import fetch_into

    assert loaded.config.connector is not None
    spool = Spool(folder / FETCHED_FILE)
    try:
        order = await fetch_into(spool.add, loaded, loaded.config.connector, limit=limit, journal=folder)
    finally:
        spool.close()
    assert order is not None
    return spool.source(order)


def _write_outputs(handle: Any, outputs: Sequence[RAGOutput]) -> None:
    from open_rag_eval.inputs import output_to_json

    handle.write("".join(json.dumps(output_to_json(o), ensure_ascii=False) + "\n" for o in outputs))



def _named(report: Callable[[str, str, int], Any], name: str) -> Callable[[str, int], None]:
    """An evaluator's progress callback: ``report`` with the evaluator's name."""
    return lambda what, n: report(name, what, n)


@contextlib.asynccontextmanager
async def _judge_for(loaded: LoadedConfig, needed: bool) -> AsyncIterator[Judge | None]:
    """The run's one judge (None when no evaluator needs one); the simulated server when the config asks for it."""
    if not needed:
        yield None
        return
    async with judge_session(loaded.judge, loaded.base_dir, str(loaded.path or "")) as judge:
        yield judge


@contextlib.asynccontextmanager
async def judge_session(config: JudgeConfig, base_dir: Path, file: str = "", **shared: Any) -> AsyncIterator[Judge]:
    """The judge ``config`` describes, open for the block; the simulated server when the config asks for it.
    ``shared``: a limiter, a cache and an endpoint index shared by many processes (``open_judge``)."""
    if config.simulated is None:
        try:
            judge = _open(config, base_dir, **shared)
        except ConfigError as error:  # the judge's checks know the YAML path; the config file is known here
            raise ConfigError(error.problem, path=error.path, file=error.file or file) from None
        async with judge:
            yield judge
        return
    from open_rag_eval.judge.simulated import SimulatedJudgeServer

    with SimulatedJudgeServer(config.simulated) as server:
        # the simulated judge answers under its own name unless the config names a model (never "gpt-4o-mini",
        # the default for a real judge, on results a real model never judged)
        model = config.model if "model" in config.model_fields_set else server.config.model
        simulated = config.model_copy(update={"base_url": server.base_url, "model": model})
        async with _open(simulated, base_dir, **shared) as judge:
            yield judge


def _open(config: JudgeConfig, base_dir: Path, **shared: Any) -> Any:
    """The judge client; a recording or replaying one when ``judge.record`` / ``judge.replay`` is set."""
    if config.replay is not None or config.record is not None:
        from open_rag_eval.judge.replay import open_taped_judge

        if shared:
            raise ConfigError("judge.record / judge.replay tape one process's calls: use executor: local",
                              path="judge.replay" if config.replay is not None else "judge.record")
        return open_taped_judge(config, base_dir=base_dir)
    from open_rag_eval.judge import open_judge

    return open_judge(config, base_dir=base_dir, **shared)


def run_info(loaded: LoadedConfig, judge: Judge | None) -> RunInfo:
    """What the run's files say about the run, decided here once the run's judge has answered (every writer is
    handed this value; nothing else decides whether a run was simulated)."""
    return RunInfo(simulated=_is_simulated(judge), config_digest=loaded.digest)


def _is_simulated(judge: Judge | None) -> bool:
    """Started as the simulated judge, or answered by one (a `simulate-judge` server named as base_url): its
    fingerprints carry a check a real endpoint's cannot pass by chance, whatever they start with."""
    if judge is None:
        return False
    accounting = getattr(judge, "accounting", None)
    seen = accounting.snapshot()["fingerprints"] if accounting is not None else []
    return judge.simulated or any(is_simulated_fingerprint(fp) for fp in seen)




def _write_report(write_report: Callable[[Path], object], out: Path) -> None:
    try:
        write_report(out)
    except OSError:
        raise  # a file problem (disk full...) fails the whole generation: the previous one stays
    except Exception as error:  # the report is a view; its failure must not lose the results
        log.warning("report.html was not written: %s", error)

