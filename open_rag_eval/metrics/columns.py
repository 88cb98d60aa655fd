"""The score columns of the generation evaluator's metrics, named once.

The metrics (``open_rag_eval.metrics.{faithfulness,context,answer,rubric,rag_guide}``) write these names and the
diagnosis rules (``open_rag_eval.diagnosis.rules``) read them, so a rule cannot read a column no metric writes. Plain
constants, no imports: the config (which validates the diagnosis section) reads them without loading the metrics.
"""

from __future__ import annotations

__all__ = ["ANSWER_RELEVANCE", "ANSWER_RELEVANCE_JUDGED", "CONTEXT_RELEVANCE", "FAITHFULNESS", "FAITHFULNESS_CITED",
           "RAG_GUIDE", "RAG_GUIDE_NAMES", "context_precision", "rag_guide", "rubric"]

FAITHFULNESS = "faithfulness.score"
FAITHFULNESS_CITED = "faithfulness.cited"
CONTEXT_RELEVANCE = "context.relevance"
ANSWER_RELEVANCE = "answer_relevance.score"  # ragas's: generated questions vs the question, embeddings
ANSWER_RELEVANCE_JUDGED = "answer_relevance.judged"  # the judge's 0-2 rating / 2


def context_precision(against: str) -> str:
    """``context.precision_answer`` / ``context.precision_reference``."""
    return f"context.precision_{against}"


def rubric(criterion: str) -> str:
    """``rubric.<criterion>``: faithfulness, relevance, completeness, coherence, citation_accuracy."""
    return f"rubric.{criterion}"


RAG_GUIDE = "rag_guide"  # the RAG evaluation & optimisation guide's own definitions (``metrics: [rag_guide]``)
RAG_GUIDE_NAMES = ("context_relevance", "context_precision", "faithfulness", "answer_relevance", "answer_correctness",
                   "overall")


def rag_guide(name: str) -> str:
    """``rag_guide.<name>``, one of ``RAG_GUIDE_NAMES``."""
    assert name in RAG_GUIDE_NAMES, name
    return f"{RAG_GUIDE}.{name}"
