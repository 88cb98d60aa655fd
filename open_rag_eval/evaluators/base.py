"""What every evaluator is: a named bundle of metrics with its own validated options.

An evaluator module defines an ``Options`` pydantic model (``extra="forbid"``) and a class with

    name: str                          # the ``type:`` in config
    needs_judge: bool                  # False: runs without any judge configured
    def __init__(self, options: Options) -> None
    def plan(self, outputs) -> Plan    # an estimate for --dry-run; calls nothing
    async def evaluate(self, outputs, ctx: Context) -> EvalResult

and is listed in ``open_rag_eval.registry.EVALUATORS``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from open_rag_eval.judge.base import Judge
from open_rag_eval.types import EvalResult, RAGOutput

__all__ = ["Context", "Evaluator", "Plan"]


@dataclass
class Plan:
    """Estimated judge work for --dry-run."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: list[str] = field(default_factory=list)

    def __add__(self, other: Plan) -> Plan:
        return Plan(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.notes + other.notes,
        )


@dataclass
class Context:
    """What an evaluator may use besides its outputs."""

    judge: Judge | None = None
    previous: EvalResult = field(default_factory=EvalResult)  # results of the evaluators before it
    output_dir: Path | None = None
    progress: Callable[[str, int], None] = lambda what, n: None  # e.g. ("outputs", 1) per output done
    extra: dict[str, Any] = field(default_factory=dict)


class Evaluator(Protocol):
    name: ClassVar[str]
    needs_judge: ClassVar[bool]
    Options: ClassVar[type[BaseModel]]

    def plan(self, outputs: Sequence[RAGOutput]) -> Plan: ...

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult: ...
