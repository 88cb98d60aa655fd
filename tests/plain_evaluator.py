"""A judge-free evaluator for pipeline and config tests: counts answer statements and passages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from open_rag_eval.evaluators.base import Context, Contract, Evaluator, Plan
from open_rag_eval.core.types import Detail, EvalResult, RAGOutput, Score


class CountOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fail_query: str | None = None  # this query's scores fail (to test missing values)


class CountEvaluator:
    name: ClassVar[str] = "count"
    Options: ClassVar[type[BaseModel]] = CountOptions

    def __init__(self, options: CountOptions) -> None:
        self.options = options

    def contract(self) -> Contract:
        """Reads the answer's statements and the passages; no judge; the whole run at once (no window_runs)."""
        return Contract(reads=frozenset({"answer", "passages"}), answer_metrics=("count.statements",),
                        window_runs=None)

    def plan(self, outputs: Sequence[RAGOutput], evaluators: Sequence[Evaluator] = ()) -> Plan:
        return Plan()

    def forget(self) -> None:
        pass

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult:
        result = EvalResult()
        for output in outputs:
            if output.query_id == self.options.fail_query:
                result.scores.append(Score.failed(output, "count.statements", "told to fail"))
            else:
                result.scores.append(Score.ok(output, "count.statements", len(output.answer)))
            result.scores.append(Score.ok(output, "count.passages", len(output.passages)))
            result.details.append(Detail(query_id=output.query_id, run=output.run, section="count", data={"n": 1}))
            ctx.progress("outputs", 1)
        return result


class UndeclaredEvaluator:
    """An evaluator written before the contract: no ``contract()`` nor ``forget()`` (a config error names them)."""

    name: ClassVar[str] = "undeclared"
    Options: ClassVar[type[BaseModel]] = CountOptions

    def __init__(self, options: CountOptions) -> None:
        self.options = options

    def plan(self, outputs: Sequence[RAGOutput]) -> Plan:
        return Plan()

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult:
        return EvalResult()
