"""The judge work of a run, planned without a call (``eval --dry-run``, ``validate``, the console's time left)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.types import RAGOutput
from open_rag_eval.evaluators.base import Plan

__all__ = ["REHEARSED_QUERIES", "context_notes", "plan"]


REHEARSED_QUERIES = 200


def plan(loaded: LoadedConfig, outputs: Sequence[RAGOutput]) -> Plan:
    """The judge work of a run, evaluator by evaluator (an evaluator whose ``plan`` takes ``evaluators`` sees all
    of them, built, e.g. to reuse the trec evaluator's planned nugget lists).

    Beyond ``REHEARSED_QUERIES`` queries, a seeded random sample of that many queries (all their runs) is planned
    and its figures scaled by the ratio of outputs, so a dry run of a large input stays quick."""
    from open_rag_eval.run.controls import plan_controls  # the controls' modules: none before a run's first request

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
