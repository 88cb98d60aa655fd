"""Judge test-retest for the ``consistency`` evaluator: how much the judge's own labels move on the same outputs.

``consistency.judge.<type>.flip_rate|alpha|crossing`` (``judge_repeats > 1``): the judge's test-retest noise on the
same outputs -- so judge noise can be told apart from system instability. Each answered output is judged
``judge_repeats`` times (sample indices 0..r-1, part of the cache key; sample 0 is the normal judgment) through the
trec evaluator's ``judge_labels``; per judgment type (umbrela grades: ordinal alpha, threshold grade >= 2; support
FS/PS/NS, nugget assignment, no_answer: nominal alpha) an item is one (run, passage / statement / nugget).
flip_rate = share of items whose labels are not all equal; crossing = share whose labels fall on both sides of the
type's threshold. These need one run only, so they are not skipped with the query.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

from open_rag_eval.errors import ConfigError, JudgeError, JudgeUnavailable
from open_rag_eval.evaluators.base import Context
from open_rag_eval.scoring.dispersion import (
    crossing_rate,
    flip_rate,
    krippendorff_alpha,
)
from open_rag_eval.types import RAGOutput, Score

__all__ = ["RETEST", "RETEST_STATS", "Labeller", "find_labeller", "judge_retest"]

log = logging.getLogger(__name__)

PREFIX = "consistency.judge"

# judgment type -> (Krippendorff level, the verdict's threshold: True on its positive side, its description)
RETEST: dict[str, tuple[str, Callable[[Any], bool], str]] = {
    "umbrela": ("ordinal", lambda grade: int(grade) >= 2, "grade >= 2 (relevant)"),
    "support": ("nominal", lambda label: label in ("FS", "PS"), "FS or PS (at least partially supported)"),
    "nugget_assignment": ("nominal", lambda label: label in ("support", "partial_support"),
                          "support or partial_support"),
    "no_answer": ("nominal", lambda label: label == "yes", "yes (the answer attempts an answer)"),
}
RETEST_STATS = ("flip_rate", "alpha", "crossing")
Labeller = Callable[[RAGOutput, Any, int], Awaitable[dict[str, dict[str, Any]]]]
# query_id -> judgment type -> (run, item) -> one label per sample
Items = dict[str, dict[str, dict[tuple[int, str], list[Any]]]]


def find_labeller(ctx: Context, trec_options: dict[str, Any]) -> Labeller:
    """The run's own trec evaluator when the pipeline shares it (its nugget lists are reused), else a new one."""
    for evaluator in ctx.extra.get("evaluators", ()):
        if getattr(evaluator, "judge_labels", None) is not None:
            return evaluator.judge_labels  # type: ignore[no-any-return]
    try:
        from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
    except ImportError as error:
        raise ConfigError(f"judge_repeats needs the trec evaluator, which cannot be imported: {error}",
                          path="consistency.judge_repeats") from None
    labeller = getattr(TrecEvaluator(TrecOptions.model_validate(trec_options)), "judge_labels", None)
    if labeller is None:
        raise ConfigError("judge_repeats needs TrecEvaluator.judge_labels, which this version lacks",
                          path="consistency.judge_repeats")
    return labeller  # type: ignore[no-any-return]


async def judge_retest(
    kept: dict[str, list[RAGOutput]], ctx: Context, details: dict[str, dict[str, Any]], repeats: int,
    trec_options: dict[str, Any], labeller: Labeller | None = None,
) -> list[Score]:
    """Rows of every judgment type and stat per query, each output judged ``repeats`` times.

    Fills ``details[query_id]["judge_retest"]``; ``labeller`` defaults to ``find_labeller(ctx, trec_options)``.
    """
    if ctx.judge is None:
        reason = "judge test-retest needs a judge (none is configured)"
        return [Score(query_id=q, run=None, metric=f"{PREFIX}.{k}.{s}", error=reason)
                for q in kept for k in RETEST for s in RETEST_STATS]
    items = await _collect(kept, ctx.judge, repeats, labeller or find_labeller(ctx, trec_options))
    scores: list[Score] = []
    for qid in kept:
        retest = details[qid].setdefault("judge_retest", {})
        for kind in RETEST:
            scores.extend(_retest_scores(qid, kind, items[qid].get(kind, {}), retest))
    return scores


async def _collect(kept: dict[str, list[RAGOutput]], judge: Any, repeats: int, labeller: Labeller) -> Items:
    """The labels of every sample of every output, gathered concurrently."""
    jobs = [(qid, output, sample) for qid, runs in kept.items() for output in runs for sample in range(repeats)]
    found = await asyncio.gather(*(_labels(labeller, output, judge, sample) for _, output, sample in jobs))
    items: Items = defaultdict(lambda: defaultdict(dict))
    for (qid, output, _), labels in zip(jobs, found):
        for kind, by_item in labels.items():
            for item, label in by_item.items():
                items[qid][kind].setdefault((output.run, str(item)), []).append(label)
    return items


async def _labels(labeller: Labeller, output: RAGOutput, judge: Any, sample: int) -> dict[str, dict[str, Any]]:
    try:
        return await labeller(output, judge, sample)
    except JudgeUnavailable:
        raise
    except JudgeError as error:  # one failed sample: its labels are missing, the others still count
        log.warning("consistency: re-judging %s run %s (sample %d) failed: %s",
                    output.query_id, output.run, sample, error)
        return {}


def _retest_scores(qid: str, kind: str, items: dict[tuple[int, str], list[Any]], detail: dict[str, Any]) -> list[Score]:
    level, positive, threshold = RETEST[kind]
    labels: dict[Any, list[Any]] = {
        key: [None if v is None else (int(v) if level == "ordinal" else v) for v in values]
        for key, values in items.items()}
    values = {"flip_rate": flip_rate(labels), "alpha": krippendorff_alpha(labels, level),  # type: ignore[arg-type]
              "crossing": crossing_rate(labels, positive)}
    detail[kind] = {"level": level, "threshold": threshold, "n_items": len(labels),
                    "n_missing": sum(v is None for vs in labels.values() for v in vs), **values}
    return [_stat_row(qid, kind, stat, values, bool(labels)) for stat in RETEST_STATS]


def _stat_row(qid: str, kind: str, stat: str, values: dict[str, float | None], judged: bool) -> Score:
    metric = f"{PREFIX}.{kind}.{stat}"
    if values[stat] is not None:
        return Score(query_id=qid, run=None, metric=metric, value=values[stat])
    if not judged:
        reason = f"no {kind} judgments for this query"
    elif stat == "alpha" and values["flip_rate"] is not None:
        reason = "alpha is undefined: every judgment gave the same label (no variation to compare against)"
    else:
        reason = "no item has two or more labels"
    return Score(query_id=qid, run=None, metric=metric, error=reason)
