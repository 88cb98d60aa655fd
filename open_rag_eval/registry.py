"""Resolve component names: a built-in name, or ``"module:Attr"`` for a user's own class."""

from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from open_rag_eval.core.errors import ConfigError

__all__ = ["CONNECTORS", "EVALUATORS", "resolve"]

EVALUATORS: dict[str, str] = {
    "trec": "open_rag_eval.evaluators.trec:TrecEvaluator",
    "consistency": "open_rag_eval.evaluators.consistency:ConsistencyEvaluator",
    "golden": "open_rag_eval.evaluators.golden:GoldenEvaluator",
    "generation": "open_rag_eval.evaluators.generation:GenerationEvaluator",
}

CONNECTORS: dict[str, str] = {
    "bm25": "connectors.bm25:Bm25Connector",
    "http": "connectors.http:HttpConnector",
    "langchain": "connectors.langchain:LangChainConnector",
    "llamaindex": "connectors.llamaindex:LlamaIndexConnector",
    "vectara": "connectors.vectara:VectaraConnector",
}

_TABLES = {"evaluator": EVALUATORS, "connector": CONNECTORS}


def resolve(kind: str, spec: str, *, path: str = "") -> Any:
    """Import the object named by ``spec``: a key of the ``kind`` table or ``"module:Attr"``."""
    table = _TABLES[kind]
    target = table.get(spec, spec)
    if ":" not in target:
        choices = ", ".join(sorted(table))
        raise ConfigError(f"unknown {kind} '{spec}'; valid choices: {choices} (or 'module:Class')", path=path)
    module_name, _, attr = target.partition(":")
    if os.getcwd() not in sys.path:  # user classes import from the working folder, as with python -m
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"cannot import {kind} module '{module_name}': {error}", path=path) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"module '{module_name}' has no {kind} '{attr}'", path=path) from None
