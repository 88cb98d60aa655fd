"""The Python API (docs/python-api.md): ``evaluate`` / ``aevaluate`` RAG outputs held in Python, get ``Results``.

    from open_rag_eval import evaluate
    results = evaluate(df, judge={"model": "gpt-4o-mini"})
    results.to_pandas(); results.summary(); results.compare(baseline); results.save("results/run1")
"""

from open_rag_eval.api.evaluate import aevaluate, evaluate
from open_rag_eval.api.results import Results

__all__ = ["Results", "aevaluate", "evaluate"]
