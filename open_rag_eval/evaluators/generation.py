"""The ``generation`` evaluator: the generation metrics RAG teams know from ragas, judged the TREC evaluator's way
(docs/generation.md) -- same judge client, cache, accounting, failure rules, outputs, dry run and report.

Metrics are selected by name (``metrics:``); ``METRICS`` maps each name to its class (a module per family under
``open_rag_eval.metrics``, pure scores in ``open_rag_eval.scoring.generation``). To add a metric: write its class
(``names()`` and ``async score(session, output)``, see ``open_rag_eval.metrics._generation``), list it here with a
field of ``GenerationOptions`` for its options, and declare its scores in the metric catalogue
(``open_rag_eval/core/families.py``) and docs/RESULTS.md.

Every output is evaluated at once and its metrics concurrently; the judge alone limits concurrency. Claims are
extracted once per text and verified once per (claims, sources) through the shared ``ClaimSession``; extraction is
queued before verification, and both before the leaf judgments (context usefulness and relevance).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from importlib import import_module
from typing import Any, ClassVar

from pydantic import BaseModel

from open_rag_eval.core.errors import JudgeError
from open_rag_eval.core.judge_tasks import FAMILY_TASKS, Tasks
from open_rag_eval.evaluators.base import Context, Contract, Evaluator, Plan, Retest
from open_rag_eval.evaluators import generation_options
from open_rag_eval.evaluators.generation_options import DEFAULT_METRICS, METRICS, SIMILARITY, GenerationOptions
from open_rag_eval.evaluators.trec import CHUNK_OUTPUTS, _gather, query_chunks
from open_rag_eval.judge.base import Judge
from open_rag_eval.metrics.interface import Asked, GenerationMetric
from open_rag_eval.metrics.claims import TRIALS, ClaimSession
from open_rag_eval.scoring.generation import blend
from open_rag_eval.core.types import EvalResult, RAGOutput, Score

__all__ = ["DEFAULT_METRICS", "METRICS", "SIMILARITY", "GenerationEvaluator", "GenerationOptions"]

# the judge tasks each metric asks (answer similarity: embeddings only)
_CLAIMS = (Tasks.CLAIM_EXTRACT, Tasks.CLAIM_VERIFY)
JUDGE_TASKS: dict[str, tuple[str, ...]] = {
    "faithfulness": _CLAIMS, "context_precision": (Tasks.CONTEXT_USEFUL,), "context_recall": _CLAIMS,
    "context_relevance": (Tasks.CONTEXT_RELEVANCE,), "answer_correctness": _CLAIMS, "rubric": (Tasks.RUBRIC,),
    "answer_similarity": (), "answer_relevance": (Tasks.ANSWER_QUESTIONS, Tasks.ANSWER_RELEVANCE),
    "rag_guide": FAMILY_TASKS["rag_guide"],
}


def _build(name: str, options: GenerationOptions) -> GenerationMetric:
    target, field = METRICS[name]
    module, _, attr = target.partition(":")
    cls = getattr(import_module(module), attr)
    return cls(getattr(options, field)) if field else cls()


# the order of its judge tasks (the console's time left, core.eta): claims are verified once extracted, the answer's
# relevance rated on the questions it was asked to answer
TASK_WAITS = {Tasks.CLAIM_VERIFY: (Tasks.CLAIM_EXTRACT,), Tasks.ANSWER_RELEVANCE: (Tasks.ANSWER_QUESTIONS,)}


class GenerationEvaluator:
    """Per-output generation metrics with the judge (see the module docstring)."""

    name: ClassVar[str] = "generation"
    Options: ClassVar[type[BaseModel]] = GenerationOptions

    def __init__(self, options: GenerationOptions | None = None) -> None:
        self.options = options or GenerationOptions()
        self.metrics = {name: _build(name, self.options) for name in self.options.metrics}

    @classmethod
    def metric_names(cls, options: GenerationOptions, before: Sequence[str] = ()) -> list[str]:
        """Every score these options can produce (config checks name them)."""
        return [n for name in options.metrics for n in _build(name, options).names()]

    def plan(self, outputs: Sequence[RAGOutput], evaluators: Sequence[Evaluator] = ()) -> Plan:
        """The requests of a run, rehearsed (``open_rag_eval.judge.rehearsal``): this evaluator's own code runs
        against the rehearsal judge, which extracts one claim per sentence and finds every claim supported."""
        from open_rag_eval.judge.rehearsal import RehearsalJudge, run_sync  # noqa: PLC0415

        judge = RehearsalJudge()
        run_sync(GenerationEvaluator(self.options).evaluate(outputs, Context(judge=judge)))
        notes = ["generation: claims are estimated (one per sentence of the answer and of the reference)"]
        return Plan(notes=notes, requests=judge.requests, reasks=self.reask_bounds())

    async def judge_labels(self, output: RAGOutput, judge: Judge, sample: int) -> dict[str, dict[str, Any]]:
        """Labels of one output's judgments made with sample index ``sample``, for judge test-retest
        (``open_rag_eval.evaluators.generation_labels``); ``retest_kinds()`` names their kinds."""
        from open_rag_eval.evaluators.generation_labels import judge_labels  # noqa: PLC0415

        return await judge_labels(self._judged_metrics(), self.options, output, judge, sample)

    def retest_kinds(self) -> list[str]:
        from open_rag_eval.evaluators.generation_labels import retest_kinds  # noqa: PLC0415

        return retest_kinds(self.options)

    def _judged_metrics(self) -> dict[str, GenerationMetric]:
        """The metrics that ask the judge for a label: no embedding-only work (answer similarity, ragas's answer
        relevance), which re-judging would only repeat."""
        metrics = {name: m for name, m in self.metrics.items()
                   if name not in ("answer_similarity", "answer_relevance", "rag_guide")}  # rag_guide: no labels yet
        if "answer_relevance" in self.metrics and "judged" in self.options.answer_relevance.variants:
            options = self.options.answer_relevance.model_copy(update={"variants": ["judged"]})
            metrics["answer_relevance"] = _build("answer_relevance", self.options.model_copy(
                update={"answer_relevance": options}))
        return metrics

    def reask_bounds(self) -> dict[str, int]:
        """Per task, the most extra attempts one request takes when its replies do not parse."""
        from open_rag_eval.metrics.rag_guide import TASKS  # noqa: PLC0415

        return dict.fromkeys((Tasks.CLAIM_EXTRACT, Tasks.CLAIM_VERIFY, Tasks.CONTEXT_USEFUL, Tasks.CONTEXT_RELEVANCE,
                              Tasks.RUBRIC, Tasks.ANSWER_QUESTIONS, Tasks.ANSWER_RELEVANCE, *TASKS), TRIALS - 1)

    def contract(self) -> Contract:
        """Output by output, so a run may be evaluated window by window (whole queries, cut as ``query_chunks``
        cuts them); every metric but context relevance reads the answer; context precision's usefulness is the
        graders' context usefulness."""
        from open_rag_eval.metrics.graders import Graders  # noqa: PLC0415

        names = list(self.metrics)
        useful = self._useful() if "context_precision" in self.metrics else None
        return Contract(reads=frozenset({"query", "answer", "passages", "references"}),
                        answer_metrics=tuple(n for n in names if n != "context_relevance"), needs_judge=True,
                        judge_tasks=tuple(dict.fromkeys(t for n in names for t in JUDGE_TASKS.get(n, ()))),
                        window_runs=0, graders=Graders(useful=useful) if useful is not None else None,
                        waits=TASK_WAITS, order="query",
                        retest=Retest("generation", self.judge_labels, self.reask_bounds()))

    def _useful(self) -> Callable[[Judge, str, str, str], Awaitable[Asked[bool]]]:
        """Context usefulness as this evaluator's context precision asks it (the controls ask it too)."""
        from open_rag_eval.metrics.context import ContextPrecision  # noqa: PLC0415

        metric = self.metrics["context_precision"]
        assert isinstance(metric, ContextPrecision)
        return lambda judge, question, answer, passage: metric.useful(ClaimSession(judge), question, answer, passage)

    def forget(self) -> None:
        """Nothing of a window is kept."""

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult:
        if ctx.judge is None:
            raise JudgeError("the generation evaluator needs a judge")
        result = EvalResult()
        for chunk in query_chunks(outputs, CHUNK_OUTPUTS):
            session = ClaimSession(ctx.judge)
            try:
                parts = await _gather([self._output(session, output, ctx) for output in chunk])
            finally:
                session.cancel()
            for part in parts:
                result.extend(part)
        return result

    async def _output(self, session: ClaimSession, output: RAGOutput, ctx: Context) -> EvalResult:
        result = EvalResult()
        if output.error is not None:
            names = [n for metric in self.metrics.values() for n in metric.names()]
            result.scores = [Score.failed(output, n, f"no output: {output.error}") for n in names]
        else:
            for scores, details in await _gather([m.score(session, output) for m in self.metrics.values()]):
                result.extend(EvalResult(scores=scores, details=details))
            result.scores += self._blended(output, result.scores)
        ctx.progress("outputs", 1)
        return result

    def _blended(self, output: RAGOutput, scores: Sequence[Score]) -> list[Score]:
        """``correctness.score`` from the output's F1 and similarity (only with ``blend: true``)."""
        options = self.options.answer_correctness
        similar = generation_options.SIMILARITY  # read where it is declared (tests replace it there)
        if "answer_correctness" not in self.metrics or not options.blend or similar is None:
            return []
        by_name = {s.metric: s for s in scores}
        f1, similarity = by_name.get("correctness.f1"), by_name.get(similar[1])
        for part, name in ((f1, "correctness.f1"), (similarity, similar[1])):
            if part is None or part.value is None:
                reason = part.error if part is not None and part.error else f"{name} has no value"
                return [Score.failed(output, "correctness.score", reason)]
        assert f1 is not None and similarity is not None and f1.value is not None and similarity.value is not None
        return [Score.ok(output, "correctness.score", blend(f1.value, similarity.value, options.weights))]
