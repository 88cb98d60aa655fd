"""What the plots, the comparison and the report know about metric names: label, axis range, direction."""

from __future__ import annotations

__all__ = ["DEFAULT_CONSISTENCY", "DEFAULT_GENERATION", "DEFAULT_TREC", "axis_range", "display_name", "family",
           "family_title", "is_count", "is_dispersion", "is_tally", "lower_is_better", "short_name"]

DEFAULT_TREC = ("umbrela.mean", "nuggets.vital", "hhem.score", "citation.f1")
DEFAULT_GENERATION = ("faithfulness.score", "faithfulness.cited", "context.precision_answer", "context.recall",
                      "context.relevance", "correctness.f1")
DEFAULT_CONSISTENCY = ("umbrela.mean", "nuggets.vital", "citation.f1", "hhem.score",
                       "consistency.bertscore_f1", "consistency.rougeL")

_LABELS = {
    "umbrela.mean": "UMBRELA mean grade (0-3)",
    "nuggets.vital": "Vital nugget recall",
    "nuggets.all": "Nugget recall (all)",
    "nuggets.weighted": "Weighted nugget score",
    "hhem.score": "HHEM factual consistency",
    "hhem.hallucinated": "Hallucinated (HHEM)",
    "citation.f1": "Citation support F1",
    "citation.precision": "Citation support precision",
    "citation.recall": "Citation support recall",
    "citation.fabricated": "Fabricated citations",
    "no_answer.answered": "Answered",
    "consistency.bertscore_f1": "BERTScore F1 across runs",
    "consistency.rougeL": "ROUGE-L across runs",
    "nuggets.vital_strict": "Vital nugget recall (strict)",
    "nuggets.weighted_strict": "Weighted nugget score (strict)",
    "citation.f1_strict": "Citation support F1 (strict)",
    "lexical.grounded": "Grounded answers (share)",
    "golden.hit@10": "Hit rate @10 (queries with a relevant result)",
    "faithfulness.score": "Faithfulness (claims supported by the context)",
    "faithfulness.cited": "Cited-passage faithfulness (claims supported by their citations)",
    "faithfulness.n_claims": "Claims in the answer",
    "faithfulness.n_uncited": "Claims without a citation",
    "context.precision_answer": "Context precision (useful for the answer)",
    "context.precision_reference": "Context precision (useful for the reference)",
    "context.recall": "Context recall (reference claims in the context)",
    "context.relevance": "Context relevance (0-2 rating / 2)",
    "context.n_reference_claims": "Claims in the reference answer",
    "correctness.f1": "Answer correctness (claim F1 vs the reference)",
    "correctness.precision": "Answer claims the reference supports",
    "correctness.recall": "Reference claims the answer covers",
    "correctness.score": "Answer correctness (F1 blended with similarity)",
    "answer_similarity.score": "Answer similarity (embedding cosine to the reference)",
    "answer_relevance.score": "Answer relevance (generated questions vs the question, embeddings)",
    "answer_relevance.judged": "Answer relevance (judge's 0-2 rating / 2)",
    "rubric.faithfulness": "Rubric: faithfulness (0-10 / 10)",
    "rubric.relevance": "Rubric: relevance (0-10 / 10)",
    "rubric.completeness": "Rubric: completeness (0-10 / 10)",
    "rubric.coherence": "Rubric: coherence (0-10 / 10)",
    "rubric.citation_accuracy": "Rubric: citation accuracy (0-10 / 10)",
    "rag_guide.context_relevance": "RAG guide: context relevance (mean 0-10 score / 10)",
    "rag_guide.context_precision": "RAG guide: context precision (binary relevance, ranked)",
    "rag_guide.faithfulness": "RAG guide: faithfulness (claims judged YES / claims; no claim = 1)",
    "rag_guide.answer_relevance": "RAG guide: answer relevance (0-10 / 10)",
    "rag_guide.answer_correctness": "RAG guide: answer correctness vs the reference (0-10 / 10)",
    "rag_guide.overall": "RAG guide: overall (mean of context relevance, faithfulness, answer relevance)",
}
_SHORT = {"umbrela.mean": "UMBRELA", "nuggets.vital": "vital", "nuggets.vital_strict": "vital strict",
          "nuggets.weighted": "weighted", "citation.f1": "cite F1", "hhem.score": "HHEM",
          "no_answer.answered": "answered", "faithfulness.score": "faithful", "faithfulness.cited": "cited faithful",
          "context.precision_answer": "ctx precision", "context.recall": "ctx recall", "correctness.f1": "correct F1"}
_FAMILIES = {
    "umbrela": "Passage relevance (UMBRELA)",
    "nuggets": "Answer completeness (nuggets)",
    "citation": "Citation support",
    "no_answer": "Answered or declined",
    "hhem": "Factual consistency (HHEM)",
    "golden": "Golden labels (qrels, reference answers)",
    "lexical": "Lexical overlap with reference answers",
    "latency": "Latency",
    "consistency": "Consistency across runs",
    "consistency.judge": "Judge test-retest",
    "spread": "Spread of each metric across runs",
    "faithfulness": "Faithfulness (claims checked against the passages)",
    "context": "Retrieved context (precision, recall, relevance)",
    "correctness": "Answer correctness (claims vs the reference answer)",
    "rubric": "Rubric judges (0-10 scores, shown on 0-1)",
    "answer_similarity": "Answer similarity to the reference (embeddings)",
    "answer_relevance": "Answer relevance to the question",
    "rag_guide": "The RAG evaluation & optimisation guide's own definitions",
}
_LOWER_BETTER_SUFFIXES = (".std", ".cv", ".iqr", ".n_invalid", ".n_failed", ".n_defaulted", ".n_unparsed",
                          ".n_uncited", "correctness.fp", "correctness.fn",
                          ".fabricated", ".hallucinated", ".ungrounded", ".flip_rate", ".crossing", ".variance",
                          ".range")
_LOWER_BETTER = {"latency.ms"}
_COUNTS = (".n_invalid", ".n_failed", ".n_defaulted", ".n_unparsed", "citation.fabricated", "latency.ms", ".n_claims",
           ".n_uncited", ".n_reference_claims", "correctness.tp", "correctness.fp", "correctness.fn")


def is_dispersion(metric: str) -> bool:
    """``consistency.<metric>.<stat>``: the spread of another metric across the runs of a query."""
    return metric.startswith("consistency.") and metric.count(".") >= 2 and not metric.startswith("consistency.judge.")


def display_name(metric: str) -> str:
    return _LABELS.get(metric, metric)


def short_name(metric: str) -> str:
    """A column header: short for the common metrics, the metric name otherwise."""
    return _SHORT.get(metric, metric)


def family(metric: str) -> str:
    """The group a metric is reported in: its prefix; judge test-retest and spreads across runs apart."""
    if is_dispersion(metric):
        return "spread"
    if metric.startswith("consistency.judge."):
        return "consistency.judge"
    return metric.split(".", 1)[0]


def family_title(name: str) -> str:
    return _FAMILIES.get(name, name)


def is_tally(metric: str) -> bool:
    """Counts of what went wrong (invalid grades, failed or defaulted judgments, fabricated citations): the report
    shows them as a note on their family, not as rows of zeros."""
    return metric.endswith((".n_invalid", ".n_failed", ".n_defaulted", ".n_unparsed")) or metric == "citation.fabricated"


def lower_is_better(metric: str) -> bool:
    return metric in _LOWER_BETTER or metric.endswith(_LOWER_BETTER_SUFFIXES)


def is_count(metric: str) -> bool:
    """Counts and times have no fixed upper bound."""
    return metric.endswith(_COUNTS) or metric in _COUNTS


def axis_range(metric: str) -> tuple[float, float] | None:
    """The fixed y range of a metric: UMBRELA grades 0-3, scores 0-1; None for counts (autoscale)."""
    if is_count(metric) or metric.endswith((".std", ".cv", ".iqr", ".cai", ".variance", ".range")):
        return None
    if metric.startswith(("umbrela.mean", "consistency.umbrela.mean")):
        return (0.0, 3.0)
    return (0.0, 1.0)
