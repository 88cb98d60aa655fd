"""Batched HHEM scoring, with long premises split into overlapping windows.

HHEM's score for a (premise, hypothesis) pair is the softmax over the two logits of the first token
(the leading ``<pad>`` of the prompt), class 1 = consistent.

Long inputs. HHEM is a T5 encoder with relative positions, so it accepts any length, but cost grows with the
square of the length and its training inputs were far shorter. When prompt + premise + hypothesis exceed
``max_tokens``:

- ``chunk`` (default): the premise is cut into windows of whole tokens that fit, consecutive windows sharing
  ``overlap`` tokens; each window is scored with the full hypothesis and the pair's score is the **maximum**
  over windows -- the answer counts as supported when some part of the sources supports it. (An answer whose
  claims are spread over several windows can score lower than it would in one window: the price of a bounded
  context, recorded as ``chunked`` / ``n_chunks``.)
- ``truncate``: only the first window is scored (the peer cuts at 8192 characters instead), recorded as
  ``truncated``.

The hypothesis is never cut: when it alone leaves too little room for the premise the pair fails with a reason.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from open_rag_eval.hhem.loader import LoadedHHEM

__all__ = ["PairResult", "Split", "in_worker", "plan_windows", "predict", "score_pairs", "split_premise"]

T = TypeVar("T")
SAFETY_TOKENS = 8  # re-tokenising a window's text can differ by a token or two at its edges
MIN_PREMISE_TOKENS = 16

_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


@dataclass(frozen=True)
class Split:
    premises: list[str]
    chunked: bool = False
    truncated: bool = False


@dataclass
class PairResult:
    score: float | None = None
    error: str | None = None
    chunked: bool = False
    truncated: bool = False
    chunk_scores: list[float] = field(default_factory=list)

    @property
    def n_chunks(self) -> int:
        return len(self.chunk_scores)


def plan_windows(n_tokens: int, budget: int, overlap: int) -> list[tuple[int, int]]:
    """Token windows [start, end) of at most ``budget`` tokens covering ``n_tokens``, sharing ``overlap``."""
    if budget < 1 or not 0 <= overlap < budget:
        raise ValueError(f"need budget >= 1 and 0 <= overlap < budget (got {budget}, {overlap})")
    if n_tokens <= budget:
        return [(0, n_tokens)]
    windows, start = [], 0
    while True:
        end = min(start + budget, n_tokens)
        windows.append((start, end))
        if end == n_tokens:
            return windows
        start += budget - overlap


def split_premise(
    loaded: LoadedHHEM, premise: str, hypothesis: str, *, max_tokens: int, overlap: int,
    mode: Literal["chunk", "truncate"],
) -> Split:
    """The premise text(s) to score against ``hypothesis`` so that each input fits ``max_tokens``."""
    tokenizer = loaded.tokenizer
    overhead = len(tokenizer(loaded.prompt.format(text1="", text2=hypothesis))["input_ids"])
    budget = max_tokens - overhead - SAFETY_TOKENS
    if budget < MIN_PREMISE_TOKENS:
        raise ValueError(
            f"the answer takes {overhead} of max_tokens={max_tokens} tokens, leaving no room for the sources; "
            "raise hallucination.max_tokens"
        )
    offsets = tokenizer(premise, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
    if len(offsets) <= budget:
        return Split([premise])
    if mode == "truncate":
        return Split([_text(premise, offsets, 0, budget)], truncated=True)
    windows = plan_windows(len(offsets), budget, min(overlap, budget // 2))
    texts = [_text(premise, offsets, start, end) for start, end in windows]
    return Split([text for text in texts if text], chunked=True)


def _text(premise: str, offsets: Sequence[tuple[int, int]], start: int, end: int) -> str:
    """The premise characters covered by tokens [start, end); tokens with empty spans (a lone "▁") are skipped."""
    spans = [(a, b) for a, b in offsets[start:end] if b > a]
    return premise[min(a for a, _ in spans) : max(b for _, b in spans)] if spans else ""


def predict(loaded: LoadedHHEM, pairs: Sequence[tuple[str, str]], batch_size: int) -> list[float]:
    """P(consistent) for each (premise, hypothesis), in batches of similar length (order preserved)."""
    import torch

    texts = [loaded.prompt.format(text1=premise, text2=hypothesis) for premise, hypothesis in pairs]
    order = sorted(range(len(texts)), key=lambda index: len(texts[index]))
    scores = [0.0] * len(texts)
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        encoded = loaded.tokenizer([texts[i] for i in batch], return_tensors="pt", padding=True)
        with torch.inference_mode():
            logits = loaded.model(
                input_ids=encoded["input_ids"].to(loaded.device),
                attention_mask=encoded["attention_mask"].to(loaded.device),
            ).logits[:, 0, :]
        for index, value in zip(batch, torch.softmax(logits.float(), dim=-1)[:, 1].tolist()):
            scores[index] = float(value)
    return scores


def score_pairs(
    loaded: LoadedHHEM, pairs: Sequence[tuple[str, str]], *, batch_size: int, max_tokens: int, overlap: int,
    mode: Literal["chunk", "truncate"],
) -> list[PairResult]:
    """One result per pair: the max over its premise windows, all windows of all pairs batched together."""
    results: list[PairResult] = []
    flat: list[tuple[str, str]] = []
    owners: list[int] = []
    for index, (premise, hypothesis) in enumerate(pairs):
        try:
            split = split_premise(loaded, premise, hypothesis, max_tokens=max_tokens, overlap=overlap, mode=mode)
        except ValueError as error:
            results.append(PairResult(error=str(error)))
            continue
        if not split.premises:
            results.append(PairResult(error="the sources hold no text the tokenizer can read"))
            continue
        results.append(PairResult(chunked=split.chunked, truncated=split.truncated))
        flat.extend((chunk, hypothesis) for chunk in split.premises)
        owners.extend([index] * len(split.premises))
    for owner, value in zip(owners, predict(loaded, flat, batch_size) if flat else []):
        results[owner].chunk_scores.append(value)
    for result in results:
        if result.error is None:
            result.score = max(result.chunk_scores)
    return results


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:  # one worker: model inference is already parallel inside torch
            _EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hhem")
        return _EXECUTOR


async def in_worker(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run CPU/GPU-bound ``function`` in the single HHEM worker thread, off the event loop."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_executor(), functools.partial(function, *args, **kwargs))
