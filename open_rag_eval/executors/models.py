"""The model stage: a run's model metrics (HHEM) scored by a Ray Data pool of model actors.

Each item is one of the run's own chunks of outputs (``evaluators.trec.query_chunks``, the chunks a local run scores
together), so every model batch holds what it holds in a local run and the scores are the same to the last bit
(padding in a batch moves a float32 score). Model actors take ``num_gpus`` each when the cluster has GPUs,
a fraction of a CPU otherwise, and load the model once.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from open_rag_eval.evaluators.base import Context
from open_rag_eval.types import EvalResult, RAGOutput

__all__ = ["ModelScorer", "model_stage"]


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


def model_stage(ray: Any, spec: Any, outputs: list[RAGOutput], *, actors: int, num_gpus: float,
                num_cpus: float) -> EvalResult:
    """``spec``'s model metrics over ``outputs``, chunk by chunk in a pool of ``actors`` model actors."""
    from open_rag_eval.evaluators.trec import CHUNK_OUTPUTS, query_chunks

    chunks = query_chunks(outputs, CHUNK_OUTPUTS)
    items = [{"chunk": i, "outputs": json.dumps([o.model_dump(mode="json") for o in chunk])}
             for i, chunk in enumerate(chunks) if chunk]
    resources: dict[str, float] = {"num_gpus": num_gpus} if num_gpus else {"num_cpus": num_cpus}
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False  # the run has its own progress display
    logging.getLogger("ray.data").setLevel(logging.WARNING)
    dataset = ray.data.from_items(items).map_batches(
        ModelScorer, fn_constructor_kwargs={"spec": spec}, batch_size=1, concurrency=max(1, min(actors, len(items))),
        **resources)
    rows = sorted(dataset.take_all(), key=lambda row: row["chunk"])
    result = EvalResult()
    for row in rows:
        result.extend(EvalResult.model_validate_json(row["result"]))
    return result


async def evaluate_models(spec: Any, outputs: list[RAGOutput]) -> EvalResult:
    """``spec``'s model metrics over ``outputs`` in this process (the merge of engine-free shards)."""
    return await spec.build().evaluate(outputs, Context(judge=_NoJudge()))
