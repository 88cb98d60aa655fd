"""Metrics whose model cannot run here (its package is not installed, as in `make demo`'s virtualenv, or its
weights are not on disk) report themselves unavailable with the reason, once, and the run goes on."""

from __future__ import annotations

import asyncio
from pathlib import Path

from open_rag_eval.evaluators.base import Context
from tests.trec_fakes import RuleJudge

DATA = Path(__file__).parent / "data" / "generation_outputs.jsonl"


def _outputs():  # type: ignore[no-untyped-def]
    from open_rag_eval.inputs import read_outputs  # noqa: PLC0415

    return [o for o in read_outputs(DATA) if o.query_id == "seasons"]


def test_an_embedding_model_that_cannot_load_makes_its_metrics_unavailable_not_the_run_fail(tmp_path: Path) -> None:
    """`make demo` installs no torch: the embedding metrics say they are unavailable and why, once, and the run
    finishes (as HHEM does without its weights) -- here with a model folder that does not exist."""
    from open_rag_eval.core.missing import UNAVAILABLE, kind  # noqa: PLC0415
    from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions  # noqa: PLC0415
    from open_rag_eval.judge.sim_answer import answer  # noqa: PLC0415

    options = GenerationOptions.model_validate({
        "metrics": ["answer_similarity", "answer_relevance"],
        "answer_similarity": {"model": str(tmp_path / "no-such-model")},
        "answer_relevance": {"variants": ["embedding"], "embedding": {"model": str(tmp_path / "no-such-model")}}})
    judge = RuleJudge(lambda r: answer(r.messages))
    result = asyncio.run(GenerationEvaluator(options).evaluate(_outputs()[:1], Context(judge=judge)))
    errors = {s.metric: s.error for s in result.scores}
    assert set(errors) == {"answer_similarity.score", "answer_relevance.score"}
    assert all(e is not None and kind(e) == UNAVAILABLE and "no-such-model" in e for e in errors.values()), errors
