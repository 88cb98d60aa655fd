"""The run's controls (``open_rag_eval.health.controls``): which of its judges get them, asking them beside the
evaluation, and their place in the dry-run plan: the trec evaluator's tasks and the generation family's context
usefulness."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

from open_rag_eval.core.errors import JudgeUnavailable
from open_rag_eval.evaluators.base import Evaluator, Plan, judged
from open_rag_eval.health.check import HealthThresholds
from open_rag_eval.health.controls import Control, Graders, ask_controls, controls_for
from open_rag_eval.judge.base import Judge
from open_rag_eval.core.types import RAGOutput

__all__ = ["graders_of", "plan_controls", "run_controls_of"]

log = logging.getLogger(__name__)


def graders_of(evaluators: Sequence[Evaluator]) -> Graders:
    """The judges the controls ask: for each task, the grader the first evaluator declaring one gives
    (``Contract.graders``: the trec evaluator's for its families, the generation family's context usefulness)."""
    return judged(evaluators)


def run_controls_of(evaluators: Sequence[Evaluator], outputs: Sequence[RAGOutput], judge: Judge | None,
                    thresholds: HealthThresholds,
                    done: Callable[[dict[str, Any] | None], None] | None = None
                    ) -> Coroutine[Any, Any, dict[str, Any] | None]:
    """The controls section of the health report (None without a judge), also handed to ``done``, when awaited.
    The controls are built here, at the call: ``outputs`` (10,000 of a large run's) are not kept while they are
    asked beside the evaluation."""
    graders = graders_of(evaluators)
    items: list[Control] | dict[str, Any] | None = None
    if judge is not None and thresholds.controls:
        try:
            items = controls_for([o for o in outputs if o.error is None], graders, thresholds.control_pairs)
        except Exception as error:  # noqa: BLE001 - the controls check the judge; they never cost the run
            items = _not_run(error)
    return _ask(judge, items, graders, thresholds, done)


async def _ask(judge: Judge | None, items: list[Control] | dict[str, Any] | None, graders: Graders,
               thresholds: HealthThresholds, done: Callable[[dict[str, Any] | None], None] | None
               ) -> dict[str, Any] | None:
    if judge is None:
        found = None
    elif not thresholds.controls:
        found = {"state": "off", "tasks": {}, "items": []}
    else:
        try:
            found = await ask_controls(judge, items or {}, graders, thresholds.min_told_apart,
                                       thresholds.pass_told_apart)
        except JudgeUnavailable:
            raise  # the judge is down: the run stops, as its metrics would
        except Exception as error:  # noqa: BLE001 - the controls check the judge; they never cost the run
            found = _not_run(error)
    if done is not None:
        done(found)
    return found


def _not_run(error: Exception) -> dict[str, Any]:
    log.warning("judge-health controls not run: %r", error)
    return {"state": f"not run: {error!r}", "tasks": {}, "items": []}


def plan_controls(evaluators: Sequence[Evaluator], outputs: Sequence[RAGOutput], thresholds: HealthThresholds) -> Plan:
    """The controls' requests, rehearsed like the evaluators' (``open_rag_eval.judge.rehearsal``)."""
    from open_rag_eval.judge.rehearsal import RehearsalJudge, run_sync  # noqa: PLC0415

    if not thresholds.controls or not graders_of(evaluators).tasks():
        return Plan()
    judge = RehearsalJudge()
    found = run_sync(run_controls_of(evaluators, outputs, judge, thresholds))
    n = len(found["items"]) if found else 0
    notes = [f"the plan includes the judge-health controls: {n} judgments whose answer is known (pairs per task; "
             "judge.health.controls: false leaves them out; docs/judge-health.md)"] if n else []
    return Plan(notes=notes, fixed=judge.requests)  # a fixed number: not scaled with a sample of the queries
