"""UMBRELA passage relevance (docs/methods.md): one judge call per (query, passage), grades 0-3.

An unparseable reply is grade 0 marked invalid (status ``defaulted``, counted in ``umbrela.n_invalid``), as the
reference does. Each grade carries the parse class of its reply (``parse``: clean / fallback / echo / invalid /
failed, docs/judge-health.md); ``parse: strict`` grades fallback and echo replies 0 invalid instead. A failed call
leaves the passage without a grade (status ``failed``): the measures that need it
are missing with the reason, the others (e.g. P@1 when passage 5 failed) keep their values.
"""

from __future__ import annotations

import asyncio
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import FAILED, classify_umbrela, worst
from open_rag_eval.judge.base import Judge, JudgeRequest, Priority
from open_rag_eval.metrics._judging import Asked, ask
from open_rag_eval.metrics.structured import ResponseFormat
from open_rag_eval.metrics.structured import params as structured_params
from open_rag_eval.prompts import Template, load
from open_rag_eval.scoring.trec import umbrela_scores
from open_rag_eval.core.types import Detail, Passage, RAGOutput, Score

__all__ = ["Grade", "UmbrelaGrader", "UmbrelaOptions", "umbrela_result"]

SYSTEM = "You are a helpful assistant."  # hard-coded in the reference GPT judge
MAX_TOKENS = 100
TEMPLATES = {
    "bing_zeroshot": "umbrela.bing_zeroshot",
    "bing_fewshot": "umbrela.bing_fewshot",
    "basic_zeroshot": "umbrela.basic_zeroshot",
    "vectara": "umbrela.vectara",  # vectara's re-wrapped bing prompt asking for a single integer
    "vectara_oss": "umbrela.vectara_oss",  # vectara's modified prompt (it sends it to GPT-OSS and Qwen models)
}
# the prompt's own system message; castorini's is SYSTEM
SYSTEMS = {"vectara": "vectara.parse_system", "vectara_oss": "vectara.parse_system"}


class UmbrelaOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # vectara picks vectara_oss by the model's name; here the config names it (never guessed from the model)
    prompt: Literal["bing_zeroshot", "bing_fewshot", "basic_zeroshot", "vectara", "vectara_oss"] = "bing_zeroshot"
    parse: Literal["trec2024", "head", "strict"] = "trec2024"  # strict: 2024 patterns, no fallback or echo
    samples: int = Field(1, ge=1, le=25)  # > 1: the mode of independent samples
    pad: bool = True  # P@k beyond the list pads with non-relevant (False: omitted, as vectara)
    # sampling: castorini's umbrela (the TREC 2024 labels); profile vectara swaps the penalties and fixes a seed
    temperature: float = Field(0.0, ge=0, le=2)
    top_p: float = Field(1.0, gt=0, le=1)
    frequency_penalty: float = Field(0.5, ge=-2, le=2)
    presence_penalty: float = Field(0.0, ge=-2, le=2)
    seed: int | None = None
    max_tokens: int | None = Field(MAX_TOKENS, ge=1)  # None: not sent (vectara sets no limit)
    response_format: ResponseFormat = "text"  # vectara: its JSON schema (metrics.structured)

    def params(self) -> dict[str, float | int]:
        """The sampling parameters of every UMBRELA call (temperature included)."""
        params: dict[str, float | int] = {"temperature": self.temperature, "top_p": self.top_p,
                                          "frequency_penalty": self.frequency_penalty,
                                          "presence_penalty": self.presence_penalty}
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        params.update(structured_params(Tasks.UMBRELA, self.response_format))
        return params if self.seed is None else {**params, "seed": self.seed}


@dataclass(frozen=True)
class Grade:
    passage_id: str
    grade: int | None
    valid: bool
    status: str  # ok | defaulted (unparseable -> 0) | failed (no grade)
    samples: tuple[int, ...] = ()
    reason: str | None = None
    parse: str = field(default="clean", compare=False)  # parse class of its reply (the worst of its samples)

    def detail(self) -> dict[str, Any]:
        data: dict[str, Any] = {"passage_id": self.passage_id, "grade": self.grade, "valid": self.valid,
                                "status": self.status, "samples": list(self.samples), "parse": self.parse}
        if self.reason:
            data["reason"] = self.reason
        return data


@dataclass
class UmbrelaGrader:
    options: UmbrelaOptions = field(default_factory=UmbrelaOptions)

    @property
    def template(self) -> Template:
        return load(TEMPLATES[self.options.prompt])

    def request(self, query: str, passage: Passage, temperature: float, sample: int) -> JudgeRequest:
        user = self.template.render(query=query, passage=passage.text)
        params = {**self.options.params(), "temperature": temperature}
        system = load(SYSTEMS[self.options.prompt]).text if self.options.prompt in SYSTEMS else SYSTEM
        return JudgeRequest.chat(Tasks.UMBRELA, user, system=system, params=params,
                                 prompt_version=self.template.sha256, sample=sample,
                                 priority=Priority.CHAIN_START)

    async def grade(self, judge: Judge, query: str, passage: Passage, sample: int = 0) -> Grade:
        """The passage's grade; with ``samples: n`` the mode of n samples (first seen wins a tie)."""
        n = self.options.samples
        replies = await asyncio.gather(*(self._one(judge, query, passage, sample * n + i) for i in range(n)))
        klass = worst([reply.parse for reply in replies])
        graded = [reply.value if reply.value is not None else (0, False) for reply in replies
                  if reply.status != "failed"]  # a reply the strict profile refuses is grade 0 invalid
        if not graded:
            return Grade(passage.id, None, False, "failed", (), replies[0].reason, FAILED)
        grade = statistics.mode(value for value, _ in graded)
        valid = any(ok for value, ok in graded if value == grade)
        unparsed = f"{klass} reply not accepted by the strict parse profile" if klass in ("fallback", "echo") \
            else "unparseable reply"
        return Grade(passage.id, grade, valid, "ok" if valid else "defaulted", tuple(value for value, _ in graded),
                     None if valid else f"{unparsed}: grade 0", klass)

    async def _one(self, judge: Judge, query: str, passage: Passage, sample: int) -> Asked[tuple[int, bool]]:
        profile = self.options.parse
        temperature = self.options.temperature
        return await ask(judge, lambda t, s: self.request(query, passage, t, s),
                         lambda text: classify_umbrela(text, profile), temperatures=(temperature, temperature),
                         sample=sample)


def umbrela_result(output: RAGOutput, grades: Sequence[Grade], options: UmbrelaOptions,
                   k_values: Sequence[int]) -> tuple[list[Score], Detail]:
    """Scores and detail of one output from its passages' grades (retrieval order)."""
    values = _values(grades, options, k_values)
    scores = [Score.ok(output, f"umbrela.{name}", value) if isinstance(value, float)
              else Score.failed(output, f"umbrela.{name}", value) for name, value in values.items()]
    scores.append(Score.ok(output, "umbrela.n_invalid", sum(1 for g in grades if g.status == "defaulted")))
    scores.append(Score.ok(output, "umbrela.n_failed", sum(1 for g in grades if g.status == "failed")))
    detail = Detail(query_id=output.query_id, run=output.run, section="umbrela",
                    data={"prompt": options.prompt, "parse": options.parse, "grades": [g.detail() for g in grades]})
    return scores, detail


def _values(grades: Sequence[Grade], options: UmbrelaOptions, k_values: Sequence[int]) -> dict[str, float | str]:
    """name -> value, or name -> reason when the value cannot be known."""
    failed = next((i for i, g in enumerate(grades) if g.grade is None), None)
    known = [g.grade for g in grades[:failed] if g.grade is not None] if failed is not None else \
        [g.grade for g in grades if g.grade is not None]
    scores = umbrela_scores(known, k_values, pad=options.pad)
    result: dict[str, float | str] = {}
    missing = None if failed is None else \
        f"grade of passage {grades[failed].passage_id} failed: {grades[failed].reason}"
    for name, value in scores.items():
        if missing is not None and not _determined(name, value, failed or 0):
            result[name] = missing
        elif value is None:
            result[name] = "no passages" if name == "mean" else \
                "undefined: fewer than k documents were retrieved (pad: false, as vectara)"
        else:
            result[name] = float(value)
    return result


def _determined(name: str, value: float | None, n_known: int) -> bool:
    """Whether a measure over the first ``n_known`` grades equals the measure over the whole list."""
    if name == "mrr":
        return bool(value)  # a relevant passage before the failed one fixes the reciprocal rank
    if name.startswith(("p@", "ap@")):
        return int(name.split("@")[1]) <= n_known
    return False  # mean, map@k and ndcg@k depend on every grade
