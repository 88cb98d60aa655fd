"""A rule judge for the generation evaluator: fixed claims per sentence and fixed verdicts, set per test."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.core.types import Labels, Passage, RAGOutput
from tests.trec_fakes import RuleJudge

_SENTENCE = re.compile(r"^\[([0-9]+)\] (.*)$", re.MULTILINE)
_CLAIM = re.compile(r"^\(([0-9]+)\) (.*)$", re.MULTILINE)


@dataclass
class Verdicts:
    """Replies by rule: every sentence is one claim (its text); ``supported(claim, sources)`` gives the supporting
    source numbers (empty: not supported; by default the sources holding the claim's first word); ``useful(passage, answer)`` 0/1; ``ratings`` per relevance prompt."""

    supported: Callable[[str, list[str]], list[int]] = lambda claim, sources: [
        i for i, source in enumerate(sources, start=1) if claim.split()[0].lower() in source.lower()]
    useful: Callable[[str, str], int] = lambda passage, answer: 1
    ratings: tuple[int, int] = (2, 2)
    refusal: Callable[[str], bool] = lambda sentence: "don't know" in sentence
    overrides: dict[str, Callable[[JudgeRequest], str | Exception]] = field(default_factory=dict)

    def __call__(self, request: JudgeRequest) -> str | Exception:
        if request.task in self.overrides:
            return self.overrides[request.task](request)
        user = request.prompt
        if request.task == "claim_extract":
            sentences = _SENTENCE.findall(user)
            claims = [{"sentence": int(n), "claim": s} for n, s in sentences if not self.refusal(s)]
            return json.dumps({"refusal": not claims and any(self.refusal(s) for _, s in sentences), "claims": claims})
        if request.task == "claim_verify":
            sources = [s for _, s in _SENTENCE.findall(user.split("Claims:")[0])]
            verdicts = []
            for n, claim in _CLAIM.findall(user.split("Claims:")[1]):
                found = self.supported(claim, sources)
                verdicts.append({"claim": int(n), "supported": bool(found), "sources": found})
            return json.dumps({"verdicts": verdicts})
        if request.task == "context_useful":
            answer = re.search(r"Answer: (.*)\n", user)
            passage = re.search(r"Passage: (.*)\n", user)
            assert answer and passage
            return json.dumps({"useful": self.useful(passage.group(1), answer.group(1))})
        if request.task == "context_relevance":
            first = "You rate how relevant" in user
            return json.dumps({"rating": self.ratings[0 if first else 1]})
        return ValueError(f"unexpected task {request.task}")


def judge(verdicts: Verdicts | None = None) -> RuleJudge:
    return RuleJudge(verdicts or Verdicts())


def output(query_id: str = "q1", run: int = 1, answer: str = "Alpha is one [1]. Beta is two [2].",
           passages: Sequence[str] = ("alpha passage", "beta passage"), reference: str | None = "Alpha is one.",
           **changes: object) -> RAGOutput:
    fields: dict[str, object] = {
        "query_id": query_id, "query": "what are alpha and beta", "run": run, "answer_text": answer,
        "passages": tuple(Passage(id=f"p{i}", text=t) for i, t in enumerate(passages, start=1)),
        "labels": Labels(reference_answer=reference)}
    fields.update(changes)
    return RAGOutput(**fields)  # type: ignore[arg-type]
