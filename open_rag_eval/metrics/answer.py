"""Answer metrics of the ``generation`` evaluator that read the answer against the question or the reference
(docs/generation.md).

``answer_similarity.score``  cosine similarity of the answer's and the ``reference_answer``'s embeddings (ragas's
                             semantic similarity); undefined without a reference or for an empty answer. It is the
                             similarity ``answer_correctness.blend`` weighs with the claim F1.
"""

from __future__ import annotations

from open_rag_eval.metrics._generation import EMPTY_ANSWER, NO_REFERENCE, PLANNED, planning, reference_of
from open_rag_eval.metrics.claims import ClaimSession
from open_rag_eval.metrics.embedding import EmbeddingOptions, embed
from open_rag_eval.scoring.generation import cosine
from open_rag_eval.types import Detail, RAGOutput, Score

__all__ = ["SIMILARITY_SCORE", "AnswerSimilarity"]

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
        first, second = await embed([answer, reference.strip()], self.options)
        value = cosine(first, second)
        if value is None:
            return [Score.failed(output, SIMILARITY_SCORE, ZERO_VECTOR)], []
        return [Score.ok(output, SIMILARITY_SCORE, value)], []
