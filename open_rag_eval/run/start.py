"""A run's start-up: its background work (numpy's import, the judge-health controls, the console's plan) begins
once the run's first judge request is out, so that none of it delays that request; the controls are built from
the run's first outputs, taken from the windows the evaluation reads."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from open_rag_eval.core.types import RAGOutput
from open_rag_eval.judge.base import Judge
from open_rag_eval.run.source import WINDOW_OUTPUTS, query_groups
from open_rag_eval.scoring.stats import preload as preload_numpy

__all__ = ["CONTROL_OUTPUTS", "FirstOutputs", "beside_first_stage"]


CONTROL_OUTPUTS = WINDOW_OUTPUTS  # the judge-health controls are drawn from the run's first window of outputs


async def beside_first_stage(judge: Judge | None, finished: asyncio.Event, first: Awaitable[list[RAGOutput]],
                              evaluators: list[Any], thresholds: Any, done: Callable[[dict[str, Any] | None], None],
                              plan: Callable[[list[RAGOutput]], object] | None = None) -> dict[str, Any] | None:
    """The run's background work, begun once its first judge request is out (``_first_request``; ``finished``:
    the evaluation is over) so that none of it delays that request: numpy's import (the summary's bootstrap needs it
    at the end) and the judge-health controls, built from the run's first outputs (``first``: ``FirstOutputs``, from
    the windows the evaluation reads) and asked beside the evaluation; ``plan`` is handed the same outputs (the
    console's time left: the run's judge work, planned beside it)."""
    await _first_request(judge, finished)
    preload_numpy()
    from open_rag_eval.run.controls import run_controls_of  # the controls' modules: none before the first request

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
