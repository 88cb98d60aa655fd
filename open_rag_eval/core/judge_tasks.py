"""Which judge tasks a metric's values come from, declared once: the report, the console and ``plot`` read it to
say "judge unhealthy" in place of a target verdict (``health.rests``), the diagnosis to doubt a hint resting on an
unhealthy task (docs/judge-health.md)."""

from __future__ import annotations

__all__ = ["FAMILY_TASKS", "NO_JUDGE", "tasks_of"]

NO_JUDGE = ("golden", "lexical", "latency", "hhem", "consistency")  # families no judge reply goes into
_CLAIMS = ("claim_extract", "claim_verify")
# a metric family (the name before the first dot) -> the judge tasks its values come from
FAMILY_TASKS: dict[str, tuple[str, ...]] = {
    "umbrela": ("umbrela",),
    "nuggets": ("nugget_create", "nugget_importance", "nugget_assign"),
    "citation": ("support",),
    "no_answer": ("no_answer",),
    "faithfulness": _CLAIMS,
    "context": (*_CLAIMS, "context_useful", "context_relevance"),
    "correctness": _CLAIMS,
    "rubric": ("rubric", "claim_extract"),
    "criteria": ("criteria", "criteria_steps"),
    "answer_relevance": ("answer_questions", "answer_relevance"),
    "rag_guide": ("rag_guide_context_relevance", "rag_guide_context_precision", "rag_guide_claims",
                  "rag_guide_verify", "rag_guide_answer_relevance", "rag_guide_correctness"),
}


def tasks_of(metric: str) -> tuple[str, ...] | None:
    """The judge tasks ``metric``'s values come from: ``()`` for a family no judge reply goes into, None for a
    judged family not declared here. A criterion's column ``criteria.<name>`` rests on its own task (health counts
    each criterion apart) as well as the steps of ``evaluation_steps``."""
    family = metric.split(".", 1)[0]
    if family in NO_JUDGE:
        return ()
    if family == "criteria":
        return (metric, *FAMILY_TASKS["criteria"])
    return FAMILY_TASKS.get(family)
