"""Judge test-retest for the ``consistency`` evaluator: how much the judge's own labels move on the same outputs.

``consistency.judge.<type>.flip_rate|alpha|crossing`` (``judge_repeats > 1``): the judge's test-retest noise on the
same outputs -- so judge noise can be told apart from system instability. Each answered output is judged
``judge_repeats`` times (sample indices 0..r-1, part of the cache key; sample 0 is the normal judgment) through the
``judge_labels`` of the evaluators named by ``retest`` (``RETEST``: the trec evaluator's types -- umbrela grades:
ordinal alpha, threshold grade >= 2; support FS/PS/NS, nugget assignment, no_answer: nominal alpha; ``GENERATION``:
the generation evaluator's, ``open_rag_eval.evaluators.generation_labels``); an item is one (run, passage /
statement / nugget / claim / rubric ...). flip_rate = share of items whose labels are not all equal; crossing =
share whose labels fall on both sides of the type's threshold. These need one run only, so they are not skipped
with the query.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from open_rag_eval.core.errors import ConfigError, JudgeError, JudgeUnavailable
from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.notices import note
from open_rag_eval.evaluators.base import Context, Labeller, Retest
from open_rag_eval.scoring.dispersion import (
    crossing_rate,
    flip_rate,
    krippendorff_alpha,
)
from open_rag_eval.core.types import RAGOutput, Score

__all__ = ["GENERATION", "RETEST", "RETEST_STATS", "Labeller", "Labellers", "find_retest", "judge_retest",
           "labellers", "retest_kinds"]

log = logging.getLogger(__name__)

PREFIX = "consistency.judge"

# judgment type -> (Krippendorff level, the verdict's threshold: True on its positive side, its description)
RETEST: dict[str, tuple[str, Callable[[Any], bool], str]] = {
    Tasks.UMBRELA: ("ordinal", lambda grade: int(grade) >= 2, "grade >= 2 (relevant)"),
    Tasks.SUPPORT: ("nominal", lambda label: label in ("FS", "PS"), "FS or PS (at least partially supported)"),
    "nugget_assignment": ("nominal", lambda label: label in ("support", "partial_support"),
                          "support or partial_support"),
    Tasks.NO_ANSWER: ("nominal", lambda label: label == "yes", "yes (the answer attempts an answer)"),
}
# the generation evaluator's judgment types (judge tasks; items in open_rag_eval.evaluators.generation_labels)
GENERATION: dict[str, tuple[str, Callable[[Any], bool], str]] = {
    Tasks.CLAIM_EXTRACT: ("ordinal", lambda n: int(n) >= 1, "at least one claim extracted"),
    "claim_refusal": ("nominal", lambda refusal: refusal is True, "a refusal"),
    Tasks.CLAIM_VERIFY: ("nominal", lambda supported: supported is True, "supported"),
    Tasks.CONTEXT_USEFUL: ("nominal", lambda useful: int(useful) == 1, "useful (1)"),
    Tasks.CONTEXT_RELEVANCE: ("ordinal", lambda rating: int(rating) >= 1, "rating >= 1 (some relevant context)"),
    Tasks.RUBRIC: ("ordinal", lambda score: int(score) >= 5, "score >= 5 of 10"),
    Tasks.ANSWER_RELEVANCE: ("ordinal", lambda rating: int(rating) >= 1, "rating >= 1 (addresses the question at least "
                                                                      "in part)"),
}
# the criteria evaluator's judgments (retest: [criteria]): each criterion's grade rescaled to 0..10 and rounded
CRITERIA: dict[str, tuple[str, Callable[[Any], bool], str]] = {
    Tasks.CRITERIA: ("ordinal", lambda grade: int(grade) >= 5, "grade at least half the scale (rescaled 0-10 >= 5)"),
}
KINDS = {**RETEST, **GENERATION, **CRITERIA}
RETEST_STATS = ("flip_rate", "alpha", "crossing")
Labellers = dict[str, tuple[Retest, list[str]]]  # evaluator type -> (what its retest re-asks, the kinds it labels)
# query_id -> judgment type -> (run, item) -> one label per sample
Items = dict[str, dict[str, dict[tuple[int, str], list[Any]]]]


def find_retest(ctx: Context, trec_options: dict[str, Any]) -> Retest:
    """The retest the run's own trec evaluator declares when the pipeline shares it (its nugget lists are reused),
    else a new one's."""
    declared = _declared(ctx, "trec")
    if declared is not None:
        return declared
    try:
        from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
    except ImportError as error:
        raise ConfigError(f"judge_repeats needs the trec evaluator, which cannot be imported: {error}",
                          path="consistency.judge_repeats") from None
    retest = TrecEvaluator(TrecOptions.model_validate(trec_options)).contract().retest
    assert retest is not None  # the trec evaluator declares what test-retest re-asks through it
    return retest


def _declared(ctx: Context, kind: str) -> Retest | None:
    """The retest the run's first evaluator declaring one of ``kind`` gives (``Contract.retest``)."""
    for evaluator in ctx.evaluators:
        retest = evaluator.contract().retest
        if retest is not None and retest.kind == kind:
            return retest
    return None


def _generation_evaluator(options: dict[str, Any]) -> Any:
    try:
        from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions  # noqa: PLC0415
    except ImportError as error:
        raise ConfigError(f"retest: [generation] needs the generation evaluator, which cannot be imported: {error}",
                          path="consistency.retest") from None
    return GenerationEvaluator(GenerationOptions.model_validate(options))


def retest_kinds(retest: Sequence[str], generation_options: dict[str, Any]) -> list[str]:
    """Every judgment type re-judged for ``retest`` (evaluator types), in order (config checks name them)."""
    kinds = list(RETEST) if "trec" in retest else []
    if "generation" in retest:
        kinds += _generation_evaluator(generation_options).retest_kinds()
    if "criteria" in retest:
        kinds += list(CRITERIA)
    return kinds


def _criteria_retest(ctx: Context) -> Retest:
    """The run's own criteria evaluator (its criteria are the run's): ``retest: [criteria]`` needs one."""
    declared = _declared(ctx, "criteria")
    if declared is not None:
        return declared
    raise ConfigError("retest: [criteria] re-judges the run's criteria: add a type: criteria evaluator before the "
                      "consistency evaluator", path="consistency.retest")


def labellers(ctx: Context, retest: Sequence[str], trec_options: dict[str, Any], generation_options: dict[str, Any],
              trec: Labeller | None = None) -> Labellers:
    """The retest and kinds of each evaluator type in ``retest`` (each as its evaluator declares it): the trec one
    found by ``find_retest`` (or ``trec``, a labeller), the generation one built from ``generation_options``."""
    found: Labellers = {}
    if "trec" in retest:
        found["trec"] = (Retest("trec", trec) if trec is not None else find_retest(ctx, trec_options), list(RETEST))
    if "generation" in retest:
        evaluator = _generation_evaluator(generation_options)
        declared = evaluator.contract().retest
        assert declared is not None  # the generation evaluator declares what test-retest re-asks through it
        found["generation"] = (declared, evaluator.retest_kinds())
    if "criteria" in retest:
        found["criteria"] = (_criteria_retest(ctx), list(CRITERIA))
    return found


async def judge_retest(
    kept: dict[str, list[RAGOutput]], ctx: Context, details: dict[str, dict[str, Any]], repeats: int,
    found: Labellers,
) -> list[Score]:
    """Rows of every judgment type and stat per query, each output judged ``repeats`` times by every labeller.

    Fills ``details[query_id]["judge_retest"]``.
    """
    kinds = [kind for _, names in found.values() for kind in names]
    if ctx.judge is None:
        reason = "judge test-retest needs a judge (none is configured)"
        return [Score(query_id=q, run=None, metric=f"{PREFIX}.{k}.{s}", error=reason)
                for q in kept for k in kinds for s in RETEST_STATS]
    items = await _collect(kept, ctx.judge, repeats, [declared.labeller for declared, _ in found.values()])
    scores: list[Score] = []
    for qid in kept:
        retest = details[qid].setdefault("judge_retest", {})
        for kind in kinds:
            scores.extend(_retest_scores(qid, kind, items[qid].get(kind, {}), retest))
    return scores


async def _collect(kept: dict[str, list[RAGOutput]], judge: Any, repeats: int, found: Sequence[Labeller]) -> Items:
    """The labels of every sample of every output by every labeller, gathered concurrently."""
    jobs = [(qid, output, sample, labeller) for labeller in found for qid, runs in kept.items() for output in runs
            for sample in range(repeats)]
    labelled = await asyncio.gather(*(_labels(labeller, output, judge, sample) for _, output, sample, labeller in jobs))
    items: Items = defaultdict(lambda: defaultdict(dict))
    for (qid, output, _, _), labels in zip(jobs, labelled):
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
        note("retest failed", "consistency: re-judging failed (that sample's labels are missing)",
             f"{output.query_id} run {output.run} sample {sample}: {error}", log.name, "sample(s)")
        return {}


def _retest_scores(qid: str, kind: str, items: dict[tuple[int, str], list[Any]], detail: dict[str, Any]) -> list[Score]:
    level, positive, threshold = KINDS[kind]
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
