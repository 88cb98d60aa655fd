"""Fakes for the TREC evaluator tests: a judge that answers by rule and records calls and concurrency."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field

from open_rag_eval.judge.base import Completion, JudgeRequest
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput

Rule = Callable[[JudgeRequest], "str | Exception"]


def default_rule(request: JudgeRequest) -> str | Exception:
    """Plausible, fixed replies per task: grade 2, three nuggets, every nugget vital and supported, FS, yes."""
    user = request.messages[-1][1]
    if request.task == "umbrela":
        return "##final score: 2"
    if request.task == "nugget_create":
        return '["n1", "n2", "n3"]'
    n = user.count("', '") + 1 if "Nugget List: ['" in user else 0
    if request.task == "nugget_importance":
        return str(["vital"] * n)
    if request.task == "nugget_assign":
        return str(["support"] * n)
    if request.task == "support":
        return "Full Support"
    if request.task == "no_answer":
        return "yes"
    return ValueError(f"unexpected task {request.task}")


@dataclass
class RuleJudge:
    """Answers each request with ``rule(request)``; an Exception reply is raised. Tracks calls in flight."""

    rule: Rule = default_rule
    model: str = "rule"
    simulated: bool = True
    calls: list[JudgeRequest] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0

    async def complete(self, request: JudgeRequest) -> Completion:
        self.calls.append(request)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            for _ in range(3):  # let every other ready coroutine start its call first
                await asyncio.sleep(0)
            reply = self.rule(request)
        finally:
            self.in_flight -= 1
        if isinstance(reply, Exception):
            raise reply
        return Completion(text=reply, prompt_tokens=len(request.messages[-1][1]) // 4)

    def tasks(self) -> list[str]:
        return [call.task for call in self.calls]


def make_output(query_id: str = "q1", run: int = 1, n_passages: int = 5, n_statements: int = 3,
                query: str = "what is x", **changes: object) -> RAGOutput:
    passages = tuple(Passage(id=f"p{i}", text=f"passage {i} about x") for i in range(1, n_passages + 1))
    answer = tuple(AnswerPart(text=f"Statement {i}.", citations=(f"p{(i - 1) % max(n_passages, 1) + 1}",)) for i in range(1, n_statements + 1))
    fields: dict[str, object] = {"query_id": query_id, "query": query, "run": run, "passages": passages,
                                 "answer": answer}
    fields.update(changes)
    return RAGOutput(**fields)  # type: ignore[arg-type]
