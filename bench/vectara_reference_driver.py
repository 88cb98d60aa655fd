"""Runs INSIDE the virtualenv of vectara's open-rag-eval 0.3.0 (made by bench/vectara_reference.py), never here.

    python vectara_reference_driver.py ANSWERS_CSV BASE_URL OUT_JSON

Its TRECEvaluator (``run_consistency: true``) and ConsistencyEvaluator (fed the TREC scores, as its run_eval does)
score the CSV with its OpenAIModel judge at BASE_URL; OUT_JSON gets every query's per-run scores and consistency
statistics. HHEM and BERTScore need model downloads: they are stubbed (HHEM a constant 0.5, BERTScore no score),
and so are the judge SDKs its model module imports but this run never calls (google-genai, anthropic, together).
"""

from __future__ import annotations

import json
import os
import sys
import types

K_VALUES = [1, 3, 5]
SPREAD = ["mean_umbrela_score", "vital_nuggetizer_score", "citation_f1_score"]
HHEM_STUB = 0.5


class _Deep(type):
    """A class whose every attribute is another such class (``together.error.Timeout``)."""

    def __getattr__(cls, attribute: str) -> type:
        return _Deep(attribute, (Exception,), {})


def _stub(name: str, **attributes: object) -> types.ModuleType:
    """A module whose every other attribute is a class of its own (an SDK's error types, clients)."""
    module = types.ModuleType(name)
    module.__dict__.update(attributes)
    module.__getattr__ = lambda attribute: _Deep(attribute, (Exception,), {})  # type: ignore[method-assign]
    sys.modules[name] = module
    return module


class _Anything:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass


def stub_downloads() -> None:
    """Modules that load models or call other vendors' SDKs, replaced before the package is imported."""
    google = _stub("google")
    google.genai = _stub("google.genai", Client=_Anything)  # type: ignore[attr-defined]
    _stub("google.genai.errors", APIError=type("APIError", (Exception,), {}))
    _stub("anthropic", Anthropic=_Anything)
    _stub("together", Together=_Anything)
    _stub("open_rag_eval.metrics.factuality_backends", FactualityBackend=_Anything, HHEMBackend=_Anything,
          VectaraAPIBackend=_Anything)

    class BERTScoreSimilarityMetric:
        name = "bert_score"

        def __init__(self, *args: object, **kwargs: object) -> None:
            pass

        def compute(self, multi_rag_result: object) -> list[float]:
            return []  # no score: the consistency result gets no bert_score entry

    _stub("open_rag_eval.metrics.bert_score_similarity_metric", BERTScoreSimilarityMetric=BERTScoreSimilarityMetric)


def main(csv_path: str, base_url: str, out_path: str) -> None:
    stub_downloads()
    from open_rag_eval.evaluators import ConsistencyEvaluator, TRECEvaluator
    from open_rag_eval.metrics.hallucination_metric import HallucinationMetric
    from open_rag_eval.models.llm_judges import OpenAIModel
    from open_rag_eval.rag_results_loader import RAGResultsLoader

    HallucinationMetric.__init__ = lambda self, *a, **k: None  # type: ignore[method-assign]
    HallucinationMetric.compute = lambda self, rag_result: {"hhem_score": HHEM_STUB}  # type: ignore[method-assign]

    os.environ["OPENAI_API_KEY"] = "sk-simulated"  # its client reads the key from the environment
    results = RAGResultsLoader(csv_path).load()
    model = OpenAIModel({"name": "simulated-judge", "api_key": "sk-simulated", "base_url": base_url})
    trec = TRECEvaluator(model, {"k_values": K_VALUES, "run_consistency": True, "metrics_to_run_consistency": SPREAD})
    scored = [trec.evaluate(result) for result in results]  # one query at a time: the judge sees one order
    spread = trec.collect_scores_for_consistency(scored, {})
    consistency = ConsistencyEvaluator({"metrics": [{"rouge_score": {}}, {"bert_score": {}}]})
    spreads = [consistency.evaluate(result, spread.get(result.query_id)) for result in results]
    out = {"queries": []}
    for multi, spreads_of in zip(scored, spreads):
        runs = []
        for run in multi.scored_rag_results:
            retrieval, generation = run.scores.retrieval_score.scores, run.scores.generation_score.scores
            runs.append({
                "statements": [{"text": p.text, "citations": p.citations}
                               for p in run.rag_result.generation_result.generated_answer],
                "retrieval": {k: v for k, v in retrieval.items() if k != "token_usage"},
                "generation": {k: v for k, v in generation.items() if k != "token_usage"},
            })
        out["queries"].append({
            "query_id": str(multi.query_id), "query": multi.query, "runs": runs,
            "consistency": {name: {"values": score.values, "stats": score.stats}
                            for name, score in spreads_of.consistency_scores.items()},
        })
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(out, handle, indent=1, sort_keys=True, default=str)


if __name__ == "__main__":
    main(*sys.argv[1:4])
