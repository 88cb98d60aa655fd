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
    "criteria": "open_rag_eval.evaluators.criteria:CriteriaEvaluator",
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
    if kind == "connector" and spec in table:
        _check_ours(path)
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


def _check_ours(path: str) -> None:
    """The built-in connectors live in the top-level package ``connectors`` that ships with open-rag-eval; another
    distribution's (or a folder's) package of that name earlier on the path would shadow it."""
    try:
        package = importlib.import_module("connectors")
    except ImportError as error:
        raise ConfigError(f"cannot import the package 'connectors' that ships with open-rag-eval: {error}; "
                          "reinstall open-rag-eval", path=path) from None
    if getattr(package, "OPEN_RAG_EVAL", False) is not True:
        raise ConfigError("the package 'connectors' imported is not the one open-rag-eval ships: another "
                          "distribution (or a folder named connectors on the Python path) shadows it; uninstall or "
                          "rename that one, or name your connector class as 'module:Class'", path=path)
