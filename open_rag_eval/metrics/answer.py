"""Answer metrics of the ``generation`` evaluator that read the answer against the question or the reference
(docs/generation.md).

``answer_similarity.score``  cosine similarity of the answer's and the ``reference_answer``'s embeddings (ragas's
                             semantic similarity); undefined without a reference or for an empty answer. It is the
                             similarity ``answer_correctness.blend`` weighs with the claim F1.
``answer_relevance.score``   ragas's answer relevancy: questions the judge writes from the answer, mean cosine of
                             their embeddings to the question's; 0 for a noncommittal answer.
``answer_relevance.judged``  the judge's 0-2 rating of how well the answer addresses the question, / 2.

A refusal leaves both answer-relevance values undefined (reason: refusal), not 0: no_answer.answered reports it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import CLEAN, INVALID, Parsed
from open_rag_eval.judge.base import JudgeRequest, Priority
from open_rag_eval.metrics._generation import EMPTY_ANSWER, NO_REFERENCE, PLANNED, REFUSAL, planning, reference_of
from open_rag_eval.metrics._judging import ask
from open_rag_eval.metrics.claims import TEMPERATURES, TRIALS, ClaimSession
from open_rag_eval.core.families import ANSWER_RELEVANCE, ANSWER_RELEVANCE_JUDGED
from open_rag_eval.core.parsing import parse_json_object
from open_rag_eval.metrics.embedding import EmbeddingOptions, embed_or_reason
from open_rag_eval.prompts import load
from open_rag_eval.scoring.generation import answer_relevance, cosine
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["SIMILARITY_SCORE", "AnswerRelevance", "AnswerRelevanceOptions", "AnswerSimilarity", "parse_judged",
           "parse_questions"]

SIMILARITY_SCORE = "answer_similarity.score"
ZERO_VECTOR = "is undefined: an embedding is all zeros"


class AnswerSimilarity:
    def __init__(self, options: EmbeddingOptions | None = None) -> None:
        self.options = options or EmbeddingOptions()

    def names(self) -> list[str]:
        return [SIMILARITY_SCORE]

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        reference = reference_of(output)
        if reference is None:
            return [Score.failed(output, SIMILARITY_SCORE, NO_REFERENCE)], []
        answer = output.plain_answer.strip()
        if not answer:
            return [Score.failed(output, SIMILARITY_SCORE, EMPTY_ANSWER)], []
        if planning(session):
            return [Score.failed(output, SIMILARITY_SCORE, PLANNED)], []
        vectors = await embed_or_reason([answer, reference.strip()], self.options)
        if isinstance(vectors, str):
            return [Score.failed(output, SIMILARITY_SCORE, vectors)], []
        first, second = vectors
        value = cosine(first, second)
        if value is None:
            return [Score.failed(output, SIMILARITY_SCORE, ZERO_VECTOR)], []
        return [Score.ok(output, SIMILARITY_SCORE, value)], []


# ---------------------------------------------------------------- answer relevance

QUESTIONS_SCORE = ANSWER_RELEVANCE
JUDGED_SCORE = ANSWER_RELEVANCE_JUDGED
QUESTION_PARAMS = {"max_tokens": 400}
RATING_PARAMS = {"max_tokens": 50}


class AnswerRelevanceOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    variants: list[Literal["embedding", "judged"]] = Field(
        default_factory=lambda: list[Literal["embedding", "judged"]](["embedding", "judged"]))
    questions: int = Field(3, ge=1, le=10)  # generated per answer (ragas's default 3)
    embedding: EmbeddingOptions = Field(default_factory=EmbeddingOptions)

    @field_validator("variants")
    @classmethod
    def _some(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("variants: one or both of embedding, judged")
        return list(dict.fromkeys(value))


def parse_questions(text: str, n: int) -> Parsed[tuple[bool, bool, tuple[str, ...]]]:
    """(refusal, noncommittal, questions) from ``{"refusal": b, "noncommittal": b, "questions": [...]}``: exactly
    ``n`` non-empty questions unless the answer is a refusal; anything else is invalid."""
    try:
        value = parse_json_object(text)
    except ValueError:
        return Parsed(None, INVALID)
    refusal, noncommittal, questions = value.get("refusal"), value.get("noncommittal"), value.get("questions")
    if not isinstance(refusal, bool) or not isinstance(noncommittal, bool) or not isinstance(questions, list):
        return Parsed(None, INVALID)
    if refusal:
        return Parsed((True, noncommittal, ()), CLEAN)
    if len(questions) != n or not all(isinstance(q, str) and q.strip() for q in questions):
        return Parsed(None, INVALID)
    return Parsed((False, noncommittal, tuple(" ".join(q.split()) for q in questions)), CLEAN)


def parse_judged(text: str) -> Parsed[tuple[bool, int | None]]:
    """(refusal, rating) from ``{"refusal": b, "rating": 0|1|2}`` (the rating may be null for a refusal)."""
    try:
        value = parse_json_object(text)
    except ValueError:
        return Parsed(None, INVALID)
    refusal, rating = value.get("refusal"), value.get("rating")
    if not isinstance(refusal, bool):
        return Parsed(None, INVALID)
    if refusal:
        return Parsed((True, None), CLEAN)
    if isinstance(rating, bool) or rating not in (0, 1, 2):
        return Parsed(None, INVALID)
    return Parsed((False, int(rating)), CLEAN)


class AnswerRelevance:
    """``answer_relevance.score`` (ragas's answer relevancy: the judge writes ``questions`` questions the answer
    answers in one call; the mean cosine of their embeddings to the real question's, 0 for a noncommittal answer)
    and ``answer_relevance.judged`` (the judge rates 0-2 how well the answer addresses the question; / 2). A refusal
    is undefined (reason: refusal), not irrelevant: the no-answer metric reports it."""

    def __init__(self, options: AnswerRelevanceOptions | None = None) -> None:
        self.options = options or AnswerRelevanceOptions()

    def names(self) -> list[str]:
        return [QUESTIONS_SCORE if v == "embedding" else JUDGED_SCORE for v in self.options.variants]

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        answer = " ".join(output.plain_answer.split())
        if not answer:
            return [Score.failed(output, n, EMPTY_ANSWER) for n in self.names()], []
        details: list[dict[str, Any]] = [{} for _ in self.options.variants]  # one each: the variants run at once
        parts = await asyncio.gather(*(self._questions(session, output, answer, d) if v == "embedding"
                                       else self._judged(session, output, answer, d)
                                       for v, d in zip(self.options.variants, details)))
        detail = {key: value for d in details for key, value in d.items()}  # in the variants' order, not the replies'
        return list(parts), [Detail(query_id=output.query_id, run=output.run, section="answer_relevance",
                                    data=detail)]

    async def _questions(self, session: ClaimSession, output: RAGOutput, answer: str,
                         detail: dict[str, Any]) -> Score:
        n = self.options.questions
        template = load("generation.answer_questions")
        user = template.render(answer=answer, n=n)
        reply = await session.shared((Tasks.ANSWER_QUESTIONS, user), ask(
            session.judge, lambda t, s: JudgeRequest.chat(
                Tasks.ANSWER_QUESTIONS, user, params={"temperature": t, **QUESTION_PARAMS},
                prompt_version=template.sha256, sample=s, priority=Priority.LEAF),
            lambda text: parse_questions(text, n), trials=TRIALS, temperatures=TEMPERATURES,
            sample=session.sample))
        detail["questions_status"], detail["questions_parse"] = reply.status, reply.parse
        if reply.value is None:
            return Score.failed(output, QUESTIONS_SCORE, f"answer question generation failed: {reply.reason}")
        refusal, noncommittal, questions = reply.value
        detail |= {"refusal": refusal, "noncommittal": noncommittal, "questions": list(questions)}
        if refusal:
            return Score.failed(output, QUESTIONS_SCORE, REFUSAL)
        if noncommittal:
            return Score.ok(output, QUESTIONS_SCORE, 0.0)
        if planning(session):
            return Score.failed(output, QUESTIONS_SCORE, PLANNED)
        vectors = await embed_or_reason([output.query, *questions], self.options.embedding)
        if isinstance(vectors, str):
            return Score.failed(output, QUESTIONS_SCORE, vectors)
        detail["similarities"] = [cosine(vectors[0], v) for v in vectors[1:]]
        value = answer_relevance(vectors[0], vectors[1:], noncommittal=False)
        return Score.ok(output, QUESTIONS_SCORE, value) if value is not None else \
            Score.failed(output, QUESTIONS_SCORE, ZERO_VECTOR)

    async def _judged(self, session: ClaimSession, output: RAGOutput, answer: str, detail: dict[str, Any]) -> Score:
        template = load("generation.answer_relevance")
        user = template.render(question=" ".join(output.query.split()), answer=answer)
        reply = await session.shared((Tasks.ANSWER_RELEVANCE, user), ask(
            session.judge, lambda t, s: JudgeRequest.chat(
                Tasks.ANSWER_RELEVANCE, user, params={"temperature": t, **RATING_PARAMS},
                prompt_version=template.sha256, sample=s, priority=Priority.LEAF),
            parse_judged, trials=TRIALS, temperatures=TEMPERATURES, sample=session.sample))
        detail["judged_status"], detail["judged_parse"] = reply.status, reply.parse
        if reply.value is None:
            return Score.failed(output, JUDGED_SCORE, f"judged answer relevance failed: {reply.reason}")
        refusal, rating = reply.value
        detail["judged_refusal"], detail["judged_rating"] = refusal, rating
        if refusal or rating is None:
            return Score.failed(output, JUDGED_SCORE, REFUSAL)
        return Score.ok(output, JUDGED_SCORE, rating / 2)
