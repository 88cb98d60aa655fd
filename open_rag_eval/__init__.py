"""open-rag-eval: evaluate RAG systems with LLM judges, the way the TREC 2024 RAG Track did.

The public API. Every name is imported on first use, so ``import open_rag_eval`` and ``open-rag-eval --help`` stay
fast. What a program (or an adapter in ``connectors/``) may rely on:

- running: ``evaluate``, ``aevaluate``, ``Results``;
- the vocabulary: ``RAGOutput``, ``Passage``, ``AnswerPart``, ``Score``; ``NO_ANSWER``, ``segment_answer`` and
  ``split_answer`` (an answer text as statements with their citations);
- the interfaces: ``Connector``, ``Evaluator``, ``Judge``;
- the error tree, ``OpenRagEvalError`` and below;
- for adapters that speak HTTP: ``bounded_client`` (a total deadline, a reply-size bound, no redirects) and its
  ``ReplyRefused``, ``RetryPolicy`` and ``parse_retry_after``; ``register_secret`` / ``register_credentials`` (values
  redacted from every message, log line and output file from then on) and ``cut`` (a redacted, shortened text for a
  message).

Modules inside the package are not the public API: they move (docs/architecture.md).
"""

from __future__ import annotations

import importlib
from typing import Any

from open_rag_eval._version import __version__

__all__ = [
    "AnswerPart",
    "ConfigError",
    "Connector",
    "Evaluator",
    "Inconclusive",
    "InputError",
    "Judge",
    "JudgeCallError",
    "JudgeError",
    "JudgeUnavailable",
    "MissingDependency",
    "ModelUnavailable",
    "NO_ANSWER",
    "OpenRagEvalError",
    "Passage",
    "RAGOutput",
    "ReplyRefused",
    "Results",
    "RetryPolicy",
    "RunIncomplete",
    "Score",
    "StorageError",
    "__version__",
    "aevaluate",
    "bounded_client",
    "cut",
    "evaluate",
    "parse_retry_after",
    "register_credentials",
    "register_secret",
    "segment_answer",
    "split_answer",
]

_ERRORS = ("ConfigError", "Inconclusive", "InputError", "JudgeCallError", "JudgeError", "JudgeUnavailable", "MissingDependency",
           "ModelUnavailable", "OpenRagEvalError", "RunIncomplete", "StorageError")
_LAZY = {
    **dict.fromkeys(("AnswerPart", "Passage", "RAGOutput", "Score"), "open_rag_eval.core.types"),
    **dict.fromkeys(_ERRORS, "open_rag_eval.core.errors"),
    **dict.fromkeys(("NO_ANSWER", "segment_answer", "split_answer"), "open_rag_eval.core.segment"),
    **dict.fromkeys(("cut", "register_credentials", "register_secret"), "open_rag_eval.core.redaction"),
    **dict.fromkeys(("ReplyRefused", "bounded_client"), "open_rag_eval.transport"),
    **dict.fromkeys(("RetryPolicy", "parse_retry_after"), "open_rag_eval.judge.limits"),
    "Judge": "open_rag_eval.judge.base",
    "Evaluator": "open_rag_eval.evaluators.base",
    "Connector": "open_rag_eval.run.fetch",
    **dict.fromkeys(("Results", "aevaluate", "evaluate"), "open_rag_eval.api"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'open_rag_eval' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
