"""Evaluation in this process: a run's windows of whole queries through every evaluator, in order (one window
when an evaluator must see the whole run). Executors' processes evaluate their shares with ``evaluate_all`` too."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar, cast

from open_rag_eval.core.notices import tallied
from open_rag_eval.core.progress import Progress
from open_rag_eval.core.types import EvalResult, RAGOutput
from open_rag_eval.evaluators.base import Context, Evaluator, check_answers, window_safe
from open_rag_eval.judge.base import Judge
from open_rag_eval.run.source import WINDOW_OUTPUTS, ListSource, OutputSource, contiguous

__all__ = ["WINDOW_OUTPUTS", "evaluate_all", "evaluate_windows", "or_empty", "own_rows", "windowed"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")


async def evaluate_windows(evaluators: list[Any], source: OutputSource, judge: Judge | None, *, output_dir: Path,
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


def windowed(evaluator: Evaluator, fewest_answered: int) -> bool:
    """Whether ``evaluator`` gives a run's results when it sees the run one window of whole queries at a time
    (its contract's ``window_runs``; ``fewest_answered``: the fewest answered runs of any query)."""
    return window_safe(evaluator, fewest_answered)


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


def _named(report: Callable[[str, str, int], Any], name: str) -> Callable[[str, int], None]:
    """An evaluator's progress callback: ``report`` with the evaluator's name."""
    return lambda what, n: report(name, what, n)
