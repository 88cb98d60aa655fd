"""Runs INSIDE the virtualenv of ragas 0.4.3 (made by bench/ragas_reference.py), never here.

    python ragas_reference_driver.py OUT_JSON

Feeds ragas's own scoring code fixed verdicts -- the verdicts its LLM prompts would return -- and writes what it
computes: Faithfulness._compute_score, ContextRecall._compute_score, ContextPrecision._calculate_average_precision
(every 0/1 verdict vector of length 1 to 5), AnswerCorrectness._compute_statement_presence and fbeta_score (every
TP/FP/FN count of 0 to 3), AnswerCorrectness's weighted average, and ContextRelevance's rating and averaging. NaN is
written as null. No LLM or embedding model is called (ragas imports ChatVertexAI, which current langchain-community
releases lack: an empty stand-in is put in its place).
"""

from __future__ import annotations

import itertools
import json
import math
import sys

import numpy as np

PATTERNS = [list(p) for n in range(1, 6) for p in itertools.product([0, 1], repeat=n)]
COUNTS = [c for c in itertools.product(range(4), repeat=3) if any(c)]
BLENDS = [(0.4, 0.8), (0.0, 0.9), (1.0, 0.5)]
RATINGS = [(2, 2), (2, 1), (0, 1), (0, 0)]


def number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)


def stub_vertexai() -> None:
    """ragas 0.4.3 imports ChatVertexAI from langchain-community, whose current releases no longer have it (it is
    never called here): an empty stand-in, so the scoring code imports."""
    import types

    try:
        import langchain_community.chat_models.vertexai  # noqa: F401
    except ImportError:
        module = types.ModuleType("langchain_community.chat_models.vertexai")
        module.ChatVertexAI = type("ChatVertexAI", (), {})  # type: ignore[attr-defined]
        sys.modules[module.__name__] = module


def main(out_path: str) -> None:
    stub_vertexai()
    from ragas.metrics._answer_correctness import AnswerCorrectness, ClassificationWithReason, StatementsWithReason
    from ragas.metrics._context_precision import ContextPrecision, Verification
    from ragas.metrics._context_recall import ContextRecall, ContextRecallClassification
    from ragas.metrics._faithfulness import Faithfulness, NLIStatementOutput, StatementFaithfulnessAnswer
    from ragas.metrics._nv_metrics import ContextRelevance
    from ragas.metrics.utils import fbeta_score

    faithfulness, recall, precision = Faithfulness(), ContextRecall(), ContextPrecision()
    correctness, relevance = AnswerCorrectness(), ContextRelevance()
    out: dict[str, dict[str, float | None]] = {name: {} for name in (
        "faithfulness", "context_recall", "context_precision", "answer_correctness_f1", "fbeta", "blend",
        "context_relevance")}
    for pattern in [[], *PATTERNS]:
        key = "".join(map(str, pattern))
        nli = NLIStatementOutput(statements=[StatementFaithfulnessAnswer(statement=f"s{i}", reason="r", verdict=v)
                                             for i, v in enumerate(pattern)])
        out["faithfulness"][key] = number(faithfulness._compute_score(nli))
        out["context_recall"][key] = number(recall._compute_score(
            [ContextRecallClassification(statement=f"s{i}", reason="r", attributed=v) for i, v in enumerate(pattern)]))
        if pattern:
            out["context_precision"][key] = number(precision._calculate_average_precision(
                [Verification(reason="r", verdict=v) for v in pattern]))
    for tp, fp, fn in COUNTS:
        def listed(n: int) -> list[StatementsWithReason]:
            return [StatementsWithReason(statement=f"s{i}", reason="r") for i in range(n)]

        key = f"{tp},{fp},{fn}"
        prediction = ClassificationWithReason(TP=listed(tp), FP=listed(fp), FN=listed(fn))
        out["answer_correctness_f1"][key] = number(correctness._compute_statement_presence(prediction))
        out["fbeta"][key] = number(fbeta_score(tp, fp, fn))
    for f1, similarity in BLENDS:
        out["blend"][f"{f1},{similarity}"] = float(np.average([f1, similarity], weights=correctness.weights))
    for first, second in RATINGS:
        score = relevance.average_scores(relevance.process_score(str(first)), relevance.process_score(str(second)))
        out["context_relevance"][f"{first},{second}"] = number(score)
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(out, handle, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
