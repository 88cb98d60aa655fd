"""The model stage: a run's model metrics (HHEM, BERTScore) scored by Ray Data pools of model actors.

Each item is one of the run's own batches, the ones a local run scores together: for HHEM a chunk of outputs
(``evaluators.trec.query_chunks``), for BERTScore a chunk of answer pairs (``evaluators.consistency.bertscore_chunks``).
So every model batch holds what it holds in a local run and the scores are the same to the last bit (padding in a
batch moves a float32 score). Model actors take ``num_gpus`` each when the cluster has GPUs, a fraction of a CPU
otherwise, and load the model once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from open_rag_eval.core.errors import MissingDependency, ModelUnavailable
from open_rag_eval.evaluators.base import Context
from open_rag_eval.metrics.similarity import BertScores
from open_rag_eval.core.types import EvalResult, RAGOutput

__all__ = ["ModelScorer", "PairScorer", "bertscore_stage", "model_stage"]


class _NoJudge:
    """The judge of a model-only evaluation: never asked."""

    model, simulated = "none", False

    async def complete(self, request: Any) -> Any:
        raise AssertionError("the model stage asks no judge")


class ModelScorer:
    """A model actor: scores chunks with one evaluator spec that computes only model metrics."""

    def __init__(self, spec: Any) -> None:
        self.evaluator = spec.build()

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        results = []
        for text in batch["outputs"]:
            outputs = [RAGOutput.model_validate(o) for o in json.loads(text)]
            done = asyncio.run(self.evaluator.evaluate(outputs, Context(judge=_NoJudge())))
            results.append(done.model_dump_json())
        return {"chunk": batch["chunk"], "result": results}


class PairScorer:
    """A model actor: BERTScore F1 of chunks of answer pairs with one consistency evaluator's options."""

    def __init__(self, options: dict[str, Any]) -> None:
        from open_rag_eval.metrics.similarity import BertScoreOptions

        self.options = BertScoreOptions.model_validate(options)

    def __call__(self, batch: dict[str, Any]) -> dict[str, Any]:
        from open_rag_eval.metrics.similarity import score_pairs

        results = []
        for text in batch["pairs"]:
            try:
                scored = score_pairs([(a, b) for a, b in json.loads(text)], self.options)
            except (ModelUnavailable, MissingDependency) as error:  # the evaluator turns it into missing rows
                results.append(json.dumps({"error": str(error)}))
            else:
                results.append(json.dumps(vars(scored)))
        return {"chunk": batch["chunk"], "result": results}


def _pool(ray: Any, scorer: type, kwargs: dict[str, Any], items: list[dict[str, Any]], *, actors: int,
          num_gpus: float, num_cpus: float) -> list[str]:
    """Each item's ``result``, in item order, scored by a pool of up to ``actors`` ``scorer`` actors."""
    resources: dict[str, float] = {"num_gpus": num_gpus} if num_gpus else {"num_cpus": num_cpus}
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the run has its own progress display
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    dataset = ray.data.from_items(items).map_batches(
        scorer, fn_constructor_kwargs=kwargs, batch_size=1, concurrency=max(1, min(actors, len(items))),
        **resources)
    return [row["result"] for row in sorted(dataset.take_all(), key=lambda row: row["chunk"])]


def model_stage(ray: Any, spec: Any, outputs: list[RAGOutput], *, actors: int, num_gpus: float,
                num_cpus: float) -> EvalResult:
    """``spec``'s model metrics over ``outputs``, chunk by chunk in a pool of ``actors`` model actors."""
    from open_rag_eval.evaluators.trec import CHUNK_OUTPUTS, query_chunks

    chunks = query_chunks(outputs, CHUNK_OUTPUTS)
    items = [{"chunk": i, "outputs": json.dumps([o.model_dump(mode="json") for o in chunk])}
             for i, chunk in enumerate(chunks) if chunk]
    result = EvalResult()
    for text in _pool(ray, ModelScorer, {"spec": spec}, items, actors=actors, num_gpus=num_gpus, num_cpus=num_cpus):
        result.extend(EvalResult.model_validate_json(text))
    return result


def bertscore_stage(ray: Any, spec: Any, outputs: list[RAGOutput], *, actors: int, num_gpus: float,
                    num_cpus: float) -> BertScores | str | None:
    """The BERTScore of a consistency evaluator (``spec``) over ``outputs``: every pair of the run's
    ``bertscore_chunks``, one chunk an item, in a pool of ``actors`` model actors; the reason when the model cannot
    score; None when there is no pair to score (the evaluator then asks the model itself)."""
    from open_rag_eval.evaluators.consistency import bertscore_chunks, bertscore_texts, compared_runs

    options = spec.options
    kept = compared_runs(outputs, options.min_runs)
    items = [{"chunk": i, "pairs": json.dumps(bertscore_texts(kept, chunk))}
             for i, chunk in enumerate(bertscore_chunks(kept))]
    if not items:
        return None
    parts = [json.loads(text) for text in _pool(ray, PairScorer, {"options": options.bertscore.model_dump()}, items,
                                                actors=actors, num_gpus=num_gpus, num_cpus=num_cpus)]
    failed = next((part["error"] for part in parts if "error" in part), None)
    if failed is not None:
        return str(failed)
    first = parts[0]
    return BertScores([f for part in parts for f in part["f1"]], first["model"], first["num_layers"],
                      first["rescaled"])


async def evaluate_models(spec: Any, outputs: list[RAGOutput]) -> EvalResult:
    """``spec``'s model metrics over ``outputs`` in this process (the merge of engine-free shards)."""
    return await spec.build().evaluate(outputs, Context(judge=_NoJudge()))
