"""Connectors produce RAG outputs by querying a live RAG system.

A connector class (named in YAML as ``type: http`` or ``type: "module:Class"``) defines an ``Options`` pydantic
model and ``async fetch(queries, repeats) -> list[RAGOutput]``. Outputs of queries that failed carry ``error``.
The pipeline saves what a connector returns to ``outputs.jsonl`` before any judging.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field

from open_rag_eval.types import RAGOutput

__all__ = ["Connector", "ConnectorConfig"]


class ConnectorConfig(BaseModel):
    """The ``connector:`` section."""

    model_config = ConfigDict(extra="forbid")

    type: str  # "http" or "module:Class"
    queries: str  # CSV with a `query` column (and optional `query_id`)
    repeats: int = Field(1, ge=1, le=1000)
    options: dict[str, Any] = {}  # validated by the connector's own Options model


class Connector(Protocol):
    Options: ClassVar[type[BaseModel]]

    async def fetch(self, queries: Sequence[tuple[str, str]], repeats: int) -> list[RAGOutput]: ...
