"""The generation evaluator's judgments as labels, for judge test-retest (``consistency.judge_repeats`` with
``retest: [generation]``; the statistics are ``open_rag_eval.evaluators.retest``'s).

One output judged with sample index s: every selected metric runs with a ``ClaimSession`` of sample s whose claim
extraction stays at sample 0 -- so verification, usefulness, relevance and rubric judgments are re-made on the same
claims, i.e. the same items -- and the texts' claims are extracted once more at sample s for the extraction's own
labels. Sample 0 is the evaluator's own judgment (served by the cache). Kinds (the judge tasks) and their items:

``claim_extract``      "answer" / "reference" -> the number of claims extracted
``claim_refusal``      "answer" -> the extraction's refusal flag
``claim_verify``       "faithfulness:<i>", "recall:<i>", "correctness.answer:<i>", "correctness.reference:<i>" -> the
                       i-th claim supported (true/false)
``context_useful``     "<answer|reference>:<passage id>" -> 0/1
``context_relevance``  "<prompt id>" -> the rating 0..2
``rubric``             "<criterion>" -> the score 0..10
``answer_relevance``   "judged" -> the rating 0..2 (a refusal gives no rating, so no label)

Values a rule gives rather than a judgment are not labels: every claim unsupported without passages, a refusal's
rubric grade, correctness where a refusal is expected. A failed judgment is a missing label (None) where its item is
known (a failed correctness verification leaves its items unlabelled for that sample).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.metrics.interface import expects_refusal, reference_of
from open_rag_eval.metrics.claims import ClaimSession, Extracted
from open_rag_eval.metrics.rubric import REFUSAL_JUDGED
from open_rag_eval.core.types import Detail, RAGOutput

if TYPE_CHECKING:
    from open_rag_eval.evaluators.generation_options import GenerationOptions
    from open_rag_eval.judge.base import Judge
    from open_rag_eval.metrics.interface import GenerationMetric

__all__ = ["judge_labels", "retest_kinds"]

Labels = dict[str, dict[str, Any]]


def _extracts(options: GenerationOptions) -> tuple[bool, bool]:
    """Whether the selected metrics extract the answer's claims, and the reference's."""
    metrics = set(options.metrics)
    answer = bool(metrics & {"faithfulness", "answer_correctness"}) \
        or ("context_precision" in metrics and "answer" in options.context_precision.against) \
        or ("rubric" in metrics and bool(set(options.rubric.rubrics) - REFUSAL_JUDGED))
    return answer, bool(metrics & {"context_recall", "answer_correctness"})


def retest_kinds(options: GenerationOptions) -> list[str]:
    """The judgment kinds the selected metrics make, in a fixed order."""
    metrics = set(options.metrics)
    answer, reference = _extracts(options)
    chosen = {
        Tasks.CLAIM_EXTRACT: answer or reference,
        "claim_refusal": answer,
        Tasks.CLAIM_VERIFY: bool(metrics & {"faithfulness", "context_recall", "answer_correctness"}),
        Tasks.CONTEXT_USEFUL: "context_precision" in metrics,
        Tasks.CONTEXT_RELEVANCE: "context_relevance" in metrics,
        Tasks.RUBRIC: "rubric" in metrics,
        Tasks.ANSWER_RELEVANCE: "answer_relevance" in metrics and "judged" in options.answer_relevance.variants,
    }
    return [kind for kind, on in chosen.items() if on]


async def judge_labels(metrics: dict[str, GenerationMetric], options: GenerationOptions, output: RAGOutput,
                       judge: Judge, sample: int) -> Labels:
    """The labels of one output judged with sample index ``sample`` (see the module docstring)."""
    from open_rag_eval.evaluators.trec import _gather  # noqa: PLC0415

    if output.error is not None:
        return {}
    kinds = retest_kinds(options)
    session = ClaimSession(judge, sample=sample, extract_sample=0)
    fresh = ClaimSession(judge, sample=sample)
    answer, reference = _extracts(options)
    text = reference_of(output)
    reference = reference and text is not None and ("context_recall" in options.metrics or not expects_refusal(output))
    try:
        parts = await _gather([metric.score(session, output) for metric in metrics.values()])
        claims = await _gather([fresh.answer_claims(output) if answer else _none(),
                                fresh.text_claims(output.query, text) if reference and text else _none()])
    finally:
        session.cancel()
        fresh.cancel()
    labels: Labels = {kind: {} for kind in kinds}
    for _, details in parts:
        _from_details(details, labels)
    _from_claims(claims[0], claims[1], labels)
    return labels


async def _none() -> None:
    return None


def _from_claims(answer: Extracted | None, reference: Extracted | None, labels: Labels) -> None:
    for item, extracted in (("answer", answer), ("reference", reference)):
        if extracted is None or extracted.status == "empty":
            continue
        failed = extracted.status == "failed"
        labels[Tasks.CLAIM_EXTRACT][item] = None if failed else len(extracted.claims)
        if item == "answer":
            labels["claim_refusal"][item] = None if failed else extracted.refusal


def _rows(items: Sequence[dict[str, Any]], prefix: str, field: str, labels: dict[str, Any]) -> None:
    for i, row in enumerate(items, start=1):
        labels[f"{prefix}:{i}"] = row.get(field)


def _from_details(details: Sequence[Detail], labels: Labels) -> None:
    for detail in details:
        data, section = detail.data, detail.section
        if section == "faithfulness" and data.get("verification_status") in ("ok", "failed"):
            _rows(data["claims"], "faithfulness", "supported", labels[Tasks.CLAIM_VERIFY])
        elif section == "context_recall" and "note" not in data:
            _rows(data.get("claims", []), "recall", "supported", labels[Tasks.CLAIM_VERIFY])
        elif section == "correctness" and "expected" not in data:
            for side in ("answer", "reference"):
                _rows(data[side].get("claims", []), f"correctness.{side}", "supported", labels[Tasks.CLAIM_VERIFY])
        elif section == "context_precision":
            for variant, row in data.items():
                for passage in row.get("passages", []):
                    useful = passage["useful"]
                    labels[Tasks.CONTEXT_USEFUL][f"{variant}:{passage['passage_id']}"] = \
                        None if useful is None else int(useful)
        elif section == "context_relevance":
            for judged in data["judges"]:
                labels[Tasks.CONTEXT_RELEVANCE][judged["prompt"]] = judged["rating"]
        elif section == "rubric":
            for row in data["rubrics"]:
                if row["status"] != "refusal":
                    labels[Tasks.RUBRIC][row["rubric"]] = row.get("score")
        elif section == "answer_relevance" and "judged_status" in data and not data.get("judged_refusal"):
            labels[Tasks.ANSWER_RELEVANCE]["judged"] = data.get("judged_rating")
