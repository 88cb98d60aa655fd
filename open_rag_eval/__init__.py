"""open-rag-eval: evaluate RAG systems with LLM judges, the way the TREC 2024 RAG Track did.

The Python API (``evaluate``, ``aevaluate``, ``Results``) and the types are imported on first use, so
``import open_rag_eval`` and ``open-rag-eval --help`` stay fast.
"""

from __future__ import annotations

import importlib
from typing import Any

from open_rag_eval._version import __version__

__all__ = ["AnswerPart", "Passage", "RAGOutput", "Results", "__version__", "aevaluate", "evaluate"]

_LAZY = {
    "AnswerPart": "open_rag_eval.core.types",
    "Passage": "open_rag_eval.core.types",
    "RAGOutput": "open_rag_eval.core.types",
    "Results": "open_rag_eval.api",
    "aevaluate": "open_rag_eval.api",
    "evaluate": "open_rag_eval.api",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'open_rag_eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
