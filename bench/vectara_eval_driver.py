"""Runs INSIDE the virtualenv of vectara's open-rag-eval 0.3.0 (made by bench/vectara_reference.py), never here.

    python vectara_eval_driver.py ANSWERS_CSV BASE_URL OUT_CSV

What its ``run_eval`` does for a TREC evaluator on a CSV of answers, without the plots and the report: load the
CSV (``RAGResultsLoader``), ``TRECEvaluator.evaluate_batch`` (its default of 5 worker threads, every metric of the
evaluator, its OpenAIModel judge at BASE_URL) and ``to_csv``. HHEM needs a model download: stubbed as in
bench/vectara_reference_driver.py (a constant, no time). bench/vs_vectara.py times this command.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # its sibling (-I leaves the script's folder out)
from vectara_reference_driver import HHEM_STUB, K_VALUES, stub_downloads  # noqa: E402


def main(csv_path: str, base_url: str, out_path: str) -> None:
    stub_downloads()
    from open_rag_eval.evaluators import TRECEvaluator
    from open_rag_eval.metrics.hallucination_metric import HallucinationMetric
    from open_rag_eval.models.llm_judges import OpenAIModel
    from open_rag_eval.rag_results_loader import RAGResultsLoader

    HallucinationMetric.__init__ = lambda self, *a, **k: None  # type: ignore[method-assign]
    HallucinationMetric.compute = lambda self, rag_result: {"hhem_score": HHEM_STUB}  # type: ignore[method-assign]

    os.environ["OPENAI_API_KEY"] = "sk-simulated"  # its client reads the key from the environment
    results = RAGResultsLoader(csv_path).load()
    model = OpenAIModel({"name": "simulated-judge", "api_key": "sk-simulated", "base_url": base_url})
    trec = TRECEvaluator(model, {"k_values": K_VALUES})
    trec.to_csv(trec.evaluate_batch(results), out_path)


if __name__ == "__main__":
    main(*sys.argv[1:4])
