"""HHEM-2.1-open: our own offline loader (no remote code), batched inference and the Vectara API backend.

Facts the code builds on (from the model card and the checkpoint's own modeling code): a flan-t5-base
``T5ForTokenClassification`` stored under a ``t5.`` prefix; input
``"<pad> Determine if the hypothesis is true given the premise?\\n\\nPremise: {text1}\\n\\nHypothesis: {text2}"``
(text1 = premise, text2 = hypothesis) tokenised with flan-t5-base's tokenizer, no truncation; score =
softmax over the first token's two logits, class 1 = consistent.
"""

from open_rag_eval.hhem.inference import PairResult, in_worker, plan_windows, predict, score_pairs, split_premise
from open_rag_eval.hhem.loader import (
    DEFAULT_MODEL_NAME,
    DEFAULT_PROMPT,
    DEFAULT_TOKENIZER,
    LoadedHHEM,
    ModelSpec,
    clear_cache,
    get_model,
    resolve_model_dir,
)
from open_rag_eval.hhem.vectara_api import VectaraApiError, VectaraSettings, evaluate_factual_consistency

__all__ = [
    "DEFAULT_MODEL_NAME",
    "DEFAULT_PROMPT",
    "DEFAULT_TOKENIZER",
    "LoadedHHEM",
    "ModelSpec",
    "PairResult",
    "VectaraApiError",
    "VectaraSettings",
    "clear_cache",
    "evaluate_factual_consistency",
    "get_model",
    "in_worker",
    "plan_windows",
    "predict",
    "resolve_model_dir",
    "score_pairs",
    "split_premise",
]
