"""Answer-attempt classifier (docs/methods.md): did the answer try to answer the query?

``no_answer.answered`` is 1 (an attempt) or 0 (a refusal); refusals are data, never dropped. The run-level mean is
the share of answered queries over the outputs with a label. A reply that is neither yes nor no is asked once more
(plain-text mode), then the value is missing with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.judge.base import Judge, JudgeRequest, Priority
from open_rag_eval.metrics._judging import Asked, ask
from open_rag_eval.metrics.structured import ResponseFormat
from open_rag_eval.metrics.structured import params as structured_params
from open_rag_eval.core.parsing import classify_no_answer
from open_rag_eval.prompts import load
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["NoAnswerClassifier", "NoAnswerOptions", "no_answer_result"]

TRIALS = 2


class NoAnswerOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    system: Literal["none", "vectara"] = "none"  # vectara: its judge's system message (profile vectara)
    response_format: ResponseFormat = "text"  # vectara: its JSON schema (metrics.structured)


@dataclass
class NoAnswerClassifier:
    options: NoAnswerOptions

    async def classify(self, judge: Judge, output: RAGOutput, sample: int = 0) -> Asked[str]:
        template = load("no_answer.vectara")
        system = load("vectara.parse_system").text if self.options.system == "vectara" else None
        user = template.render(query=output.query, answer=output.plain_answer)
        formats = structured_params(Tasks.NO_ANSWER, self.options.response_format)
        return await ask(
            judge,
            lambda t, s: JudgeRequest.chat(Tasks.NO_ANSWER, user, system=system,
                                           params={"temperature": t, "seed": 42, **formats},
                                           prompt_version=template.sha256, sample=s,
                                           priority=Priority.LEAF),
            classify_no_answer, trials=TRIALS, temperatures=(0.0, 0.0), sample=sample)


def no_answer_result(output: RAGOutput, reply: Asked[str]) -> tuple[list[Score], Detail]:
    status = "ok" if reply.value is not None else "failed"
    data: dict[str, object] = {"label": reply.value, "status": status, "parse": reply.parse}
    if reply.value is None:
        reason = reply.reason or "no label"
        data["reason"] = reason
        score = Score.failed(output, "no_answer.answered", reason)
    else:
        score = Score.ok(output, "no_answer.answered", 1.0 if reply.value == "yes" else 0.0)
    return [score], Detail(query_id=output.query_id, run=output.run, section="no_answer", data=data)
