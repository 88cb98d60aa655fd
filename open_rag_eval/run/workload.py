"""The run's judge work as the console's time left needs it (``core.eta.Workload``), planned beside the run.

The plan is the dry run's (``run.planning.plan``: every evaluator's requests rehearsed) on a random sample of
``PLANNED_QUERIES`` queries of the outputs the controls are drawn from, scaled to the whole run (a query's requests
are the unit a plan scales by), with the controls' own requests as they are; the evaluators' contracts declare
which of their judge tasks wait for which (``waits``) and which ask one query's requests one after another
(``in_turn``). It is planned in a thread of its own so the run's first requests do not wait for it: until it is
known, the console says "ETA unknown". Planning never endangers the run: a failure leaves the ETA unknown (logged
at debug level), and the rehearsal's own log lines and notices are not shown (they are the run's to say).
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.eta import Workload
from open_rag_eval.core.types import RAGOutput

__all__ = ["plan_beside", "workload"]

log = logging.getLogger(__name__)
THREAD = "open-rag-eval-eta-plan"


PLANNED_QUERIES = 16  # queries rehearsed for the ETA (a random sample, seed 0): a run's plan scales per query
START_WAIT_S = 30.0  # at most this long for the judge's first answer before planning anyway


def workload(loaded: LoadedConfig, outputs: Sequence[RAGOutput], n_outputs: int) -> Workload:
    """The judge work of a run of ``n_outputs`` whose first outputs are ``outputs``: the requests of a sample of
    their queries, scaled to the run, plus the controls' fixed requests, unscaled."""
    from open_rag_eval.run.planning import plan  # noqa: PLC0415 (the run loop starts this module)

    queries = list(dict.fromkeys(o.query_id for o in outputs))
    chosen = set(random.Random(0).sample(queries, min(PLANNED_QUERIES, len(queries))))
    sample = [o for o in outputs if o.query_id in chosen]
    planned = plan(loaded, sample)
    scale = planned.scale * n_outputs / len(sample) if sample else 1.0
    calls: Counter[str] = Counter()
    for call in planned.requests.values():
        calls[call.task] += 1
    calls = Counter({task: round(n * scale) for task, n in calls.items()})
    calls.update(call.task for key, call in planned.fixed.items() if key not in planned.requests)
    evaluators = [spec.build() for spec in loaded.evaluators]
    waits: dict[str, tuple[str, ...]] = {}
    in_turn: dict[str, int] = {}
    for evaluator in evaluators:
        contract = evaluator.contract()
        for task, before in contract.waits.items():
            waits[task] = tuple(dict.fromkeys((*waits.get(task, ()), *before)))
        for task in contract.in_turn:
            asked = sum(1 for call in planned.requests.values() if call.task == task)
            in_turn[task] = max(in_turn.get(task, 1), math.ceil(asked / max(1, len(chosen))))
    judged = tuple(e.name for e in evaluators if e.contract().needs_judge)
    return Workload(dict(calls), waits, in_turn, judged)


def plan_beside(loaded: LoadedConfig, outputs: Sequence[RAGOutput], n_outputs: int,
                done: Callable[[Workload], None], judge: Any = None) -> threading.Thread:
    """Plan the run in a daemon thread (a run that ends first does not wait for it); ``done`` gets the workload.
    With ``judge``, planning starts once the run has asked it something: the run's own start (its first requests,
    the prompt templates they load) goes first, and planning does not slow it."""

    def work() -> None:
        waited = 0.0
        while judge is not None and not _asked(judge) and waited < START_WAIT_S:
            time.sleep(0.05)
            waited += 0.05
        quiet = _Quiet()
        handlers = list(logging.getLogger().handlers)
        for handler in handlers:
            handler.addFilter(quiet)
        try:
            done(workload(loaded, outputs, n_outputs))
        except Exception as error:  # noqa: BLE001 -- the ETA stays unknown; the run goes on
            log.debug("the run's judge work could not be planned for its ETA: %s", error)
        finally:
            for handler in handlers:
                handler.removeFilter(quiet)

    thread = threading.Thread(target=work, name=THREAD, daemon=True)
    thread.start()
    return thread


def _asked(judge: Any) -> bool:
    """The run has asked ``judge`` something: a request queued or in flight, or one answered (from the cache too)."""
    pending = getattr(judge, "pending", 0)
    accounting = getattr(judge, "accounting", None)
    try:
        total = accounting.total() if accounting is not None else None
    except RuntimeError:  # its tasks changed while this thread read them: something was asked
        return True
    return (isinstance(pending, int) and pending > 0) or bool(total and total.calls + total.cache_hits)


class _Quiet(logging.Filter):
    """Drops the planning thread's log lines (the rehearsal's warnings would repeat the run's own)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != THREAD
