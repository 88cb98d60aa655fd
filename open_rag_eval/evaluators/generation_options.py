"""The ``generation`` evaluator's options: which metrics run (``METRICS`` maps each name to its class and the
options field it reads) and each family's own options. Imported by the evaluator and by the test-retest labels."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from open_rag_eval import profiles
from open_rag_eval.metrics.answer import AnswerRelevanceOptions
from open_rag_eval.metrics.context import ContextPrecisionOptions
from open_rag_eval.metrics.correctness import CorrectnessOptions
from open_rag_eval.metrics.embedding import EmbeddingOptions
from open_rag_eval.metrics.faithfulness import FaithfulnessOptions
from open_rag_eval.metrics.rubric import RubricOptions

__all__ = ["DEFAULT_METRICS", "METRICS", "SIMILARITY", "GenerationOptions"]

# name in config -> (class, the GenerationOptions field holding its options or None)
METRICS: dict[str, tuple[str, str | None]] = {
    "faithfulness": ("open_rag_eval.metrics.faithfulness:Faithfulness", "faithfulness"),
    "context_precision": ("open_rag_eval.metrics.context:ContextPrecision", "context_precision"),
    "context_recall": ("open_rag_eval.metrics.context:ContextRecall", None),
    "context_relevance": ("open_rag_eval.metrics.context:ContextRelevance", None),
    "answer_correctness": ("open_rag_eval.metrics.correctness:AnswerCorrectness", "answer_correctness"),
    "rubric": ("open_rag_eval.metrics.rubric:Rubric", "rubric"),
    "answer_similarity": ("open_rag_eval.metrics.answer:AnswerSimilarity", "answer_similarity"),
    "answer_relevance": ("open_rag_eval.metrics.answer:AnswerRelevance", "answer_relevance"),
    # the RAG evaluation & optimisation guide's own definitions, columns rag_guide.* (docs/seeds.md)
    "rag_guide": ("open_rag_eval.metrics.rag_guide:RagGuide", None),
}
DEFAULT_METRICS = ("faithfulness", "context_precision", "context_recall", "context_relevance", "answer_correctness")
# The semantic-similarity score answer correctness blends with (``answer_correctness.blend: true``): (the metric
# name that must be selected, the score name it produces), or None when no similarity metric is available.
SIMILARITY: tuple[str, str] | None = ("answer_similarity", "answer_similarity.score")


class GenerationOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: profiles.ProfileName = profiles.DEFAULT  # fills the options not given (docs/profiles.md)
    metrics: list[str] = Field(default_factory=lambda: list(DEFAULT_METRICS))
    faithfulness: FaithfulnessOptions = Field(default_factory=FaithfulnessOptions)
    context_precision: ContextPrecisionOptions = Field(default_factory=ContextPrecisionOptions)
    answer_correctness: CorrectnessOptions = Field(default_factory=CorrectnessOptions)
    rubric: RubricOptions = Field(default_factory=RubricOptions)
    answer_similarity: EmbeddingOptions = Field(default_factory=EmbeddingOptions)
    answer_relevance: AnswerRelevanceOptions = Field(default_factory=AnswerRelevanceOptions)

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data: Any) -> Any:
        return profiles.apply("generation", data)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in METRICS]
        if unknown:
            raise ValueError(f"unknown metric(s) {', '.join(unknown)}; valid choices: {', '.join(METRICS)}")
        if not value:
            raise ValueError(f"select at least one metric: {', '.join(METRICS)}")
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _blend_needs_similarity(self) -> GenerationOptions:
        if "answer_correctness" in self.metrics and self.answer_correctness.blend:
            if SIMILARITY is None:
                raise ValueError("answer_correctness.blend needs a semantic-similarity metric, which this version "
                                 "does not provide yet; set blend: false (the F1 alone)")
            if SIMILARITY[0] not in self.metrics:
                raise ValueError(f"answer_correctness.blend needs the '{SIMILARITY[0]}' metric in metrics")
        return self
