"""The LLM judge: the ``Judge`` protocol, the OpenAI-compatible client and its collaborators.

Importing this package is cheap: the config schemas, the client and its HTTP stack load on first use of their names.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from open_rag_eval.judge.base import Completion, Judge, JudgeRequest, Message

if TYPE_CHECKING:
    from open_rag_eval.judge.accounting import Accounting, price_for
    from open_rag_eval.judge.cache import JudgeCache
    from open_rag_eval.judge.client import OpenAIJudge, open_judge
    from open_rag_eval.judge.config import JudgeConfig, Price, SimulatedJudgeConfig
    from open_rag_eval.judge.limits import Limiter, OutageBreaker, RetryPolicy

__all__ = [
    "Accounting",
    "Completion",
    "Judge",
    "JudgeCache",
    "JudgeConfig",
    "JudgeRequest",
    "Limiter",
    "Message",
    "OpenAIJudge",
    "OutageBreaker",
    "Price",
    "RetryPolicy",
    "SimulatedJudgeConfig",
    "open_judge",
    "price_for",
]

_LAZY = {
    "Accounting": "accounting",
    "price_for": "accounting",
    "JudgeCache": "cache",
    "JudgeConfig": "config",
    "Price": "config",
    "SimulatedJudgeConfig": "config",
    "Limiter": "limits",
    "OutageBreaker": "limits",
    "RetryPolicy": "limits",
    "OpenAIJudge": "client",
    "open_judge": "client",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(f"open_rag_eval.judge.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'open_rag_eval.judge' has no attribute '{name}'")
