"""HHEM factual-consistency scores: ``hhem.score`` (0-1, higher = more consistent) and ``hhem.hallucinated``.

The TREC evaluator constructs ``HallucinationMetric(options)`` once and awaits ``score(outputs)`` with every
output of the run, so inference batches across outputs.

- Premise = the output's passages in retrieval order joined by one space (as the peer does; flan-t5's
  tokenizer reads any whitespace run alike), hypothesis = the answer's plain text (citation markers removed).
- ``premise_max_chars`` (vectara: 8192) cuts the joined premise to that many characters before the model sees it;
  the detail says so (``premise_cut``).
- ``hhem.hallucinated`` = 1 when ``hhem.score < threshold`` (default 0.5), else 0.
- No number is invented: an output with no answer text, no passages, or a system error gets a failed score
  with the reason; so does every output when the weights are unavailable (the reason says where to put them,
  logged once) -- the rest of the evaluation continues. A non-empty refusal is scored like any answer
  (HHEM judges whether it is supported by the passages; ``no_answer`` reports refusals separately).
- Backends: ``hhem`` (local weights, our loader, see ``open_rag_eval.hhem``) or ``vectara_api``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from open_rag_eval.core.errors import MissingDependency, ModelUnavailable
from open_rag_eval.hhem.inference import PairResult, in_worker, score_pairs
from open_rag_eval.hhem.loader import DEFAULT_MODEL_NAME, LoadedHHEM, ModelSpec, get_model
from open_rag_eval.core.redaction import cut, register_secret
from open_rag_eval.core.types import Detail, EvalResult, RAGOutput, Score

__all__ = ["HallucinationMetric", "HallucinationOptions", "VectaraApiOptions"]

logger = logging.getLogger(__name__)
PREMISE_SEPARATOR = " "
METRICS = ("hhem.score", "hhem.hallucinated")


class VectaraApiOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    api_key_env: str = "VECTARA_API_KEY"  # the NAME of the variable; its value never lands in any output
    base_url: str = "https://api.vectara.io"
    language: str | None = None  # ISO 639-3 ("eng"); omitted: the API's default
    timeout_s: float = Field(30.0, gt=0, le=86_400)
    max_retries: int = Field(3, ge=0, le=20)
    max_concurrency: int = Field(4, ge=1, le=256)


class HallucinationOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: Literal["hhem", "vectara_api"] = "hhem"
    threshold: float = Field(0.5, ge=0, le=1)
    # where the weights are: a directory, else model_name resolved in the Hugging Face cache (offline)
    model_path: str | None = None
    model_name: str = DEFAULT_MODEL_NAME
    revision: str | None = None
    cache_dir: str | None = None  # the hub cache; default HF_HUB_CACHE, else HF_HOME/hub
    tokenizer: str | None = None  # a directory or cached hub name; default: the model dir, else its `foundation`
    device: str = Field("auto", pattern=r"^(auto|cpu|cuda(:[0-9]+)?)$")
    batch_size: int = Field(8, ge=1, le=1024)
    torch_threads: int | None = Field(None, ge=1, le=512)  # process-wide torch.set_num_threads
    max_tokens: int = Field(2048, ge=64, le=65536)  # longest model input; longer premises are chunked/truncated
    overlap_tokens: int = Field(128, ge=0)
    long_inputs: Literal["chunk", "truncate"] = "chunk"
    premise_max_chars: int | None = Field(None, ge=1)  # vectara cuts the joined passages at 8,192 characters
    vectara: VectaraApiOptions = VectaraApiOptions()

    def spec(self) -> ModelSpec:
        return ModelSpec(self.model_path, self.model_name, self.revision, self.cache_dir, self.tokenizer, self.device)


def hypothesis_of(output: RAGOutput) -> str:
    return (output.plain_answer or output.answer_text).strip()


def premise_of(output: RAGOutput, max_chars: int | None = None) -> str:
    """The passages in retrieval order joined by one space, cut at ``max_chars`` characters when given."""
    premise = PREMISE_SEPARATOR.join(p.text for p in output.passages)
    return premise if max_chars is None else premise[:max_chars]


def unscorable(output: RAGOutput) -> str | None:
    """Why ``output`` cannot be scored, or None."""
    if output.error:
        return f"no output to score: {output.error}"
    if not hypothesis_of(output):
        return "no answer to score (the answer is empty)"
    if not any(passage.text.strip() for passage in output.passages):
        return "no passages to check the answer against"
    return None


def _load(spec: ModelSpec, threads: int | None) -> LoadedHHEM:
    if threads:
        import torch

        torch.set_num_threads(threads)
    return get_model(spec)


class HallucinationMetric:
    def __init__(self, options: HallucinationOptions, *, http_client: Any = None) -> None:
        self.options = options
        self._http_client = http_client  # vectara_api: a shared httpx2.AsyncClient, else one per call
        self._said: set[str] = set()  # each reason is logged once per metric (one run), not once per process

    def _log_once(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            logger.warning("hhem: %s", message)

    async def score(self, outputs: Sequence[RAGOutput]) -> EvalResult:
        result = EvalResult()
        todo: list[RAGOutput] = []
        for output in outputs:
            reason = unscorable(output)
            if reason:
                result.scores.extend(Score.failed(output, metric, reason) for metric in METRICS)
            else:
                todo.append(output)
        if todo:
            backend = self._hhem if self.options.backend == "hhem" else self._vectara
            for output, pair in zip(todo, await backend(todo)):
                result.extend(self._rows(output, pair))
        return result

    def _rows(self, output: RAGOutput, pair: PairResult) -> EvalResult:
        if pair.score is None:
            reason = pair.error or "no score"
            return EvalResult(scores=[Score.failed(output, metric, reason) for metric in METRICS])
        hallucinated = 1.0 if pair.score < self.options.threshold else 0.0
        data = {"backend": self.options.backend, "chunked": pair.chunked, "n_chunks": pair.n_chunks,
                "threshold": self.options.threshold, "truncated": pair.truncated,
                "chunk_scores": [round(value, 6) for value in pair.chunk_scores]}
        limit = self.options.premise_max_chars
        if limit is not None and self.options.backend == "hhem":
            data["premise_cut"] = len(premise_of(output)) > limit
        return EvalResult(
            scores=[Score.ok(output, "hhem.score", pair.score), Score.ok(output, "hhem.hallucinated", hallucinated)],
            details=[Detail(query_id=output.query_id, run=output.run, section="hhem", data=data)],
        )

    async def _hhem(self, outputs: Sequence[RAGOutput]) -> list[PairResult]:
        options = self.options
        try:
            loaded = await in_worker(_load, options.spec(), options.torch_threads)
        except (ModelUnavailable, MissingDependency) as error:
            self._log_once(str(error))
            return [PairResult(error=str(error)) for _ in outputs]
        pairs = [(premise_of(o, options.premise_max_chars), hypothesis_of(o)) for o in outputs]
        try:
            return await in_worker(
                score_pairs, loaded, pairs, batch_size=options.batch_size, max_tokens=options.max_tokens,
                overlap=options.overlap_tokens, mode=options.long_inputs,
            )
        except RuntimeError as error:  # e.g. out of memory: every output of the call lacks a score
            reason = f"HHEM inference failed: {cut(str(error), 300)}"
            self._log_once(reason)
            return [PairResult(error=reason) for _ in outputs]

    async def _vectara(self, outputs: Sequence[RAGOutput]) -> list[PairResult]:
        settings = self.options.vectara
        api_key = os.environ.get(settings.api_key_env, "")
        if not api_key:
            reason = (f"the environment variable {settings.api_key_env} holding the Vectara API key is not set "
                      "(hallucination.vectara.api_key_env names it)")
            self._log_once(reason)
            return [PairResult(error=reason) for _ in outputs]

        register_secret(api_key)
        if self._http_client is not None:
            return await self._vectara_calls(self._http_client, api_key, outputs)
        from open_rag_eval.transport import bounded_client  # a total deadline, a bounded reply, no redirects

        async with bounded_client(timeout_s=settings.timeout_s, max_bytes=8_000_000) as client:
            return await self._vectara_calls(client, api_key, outputs)

    async def _vectara_calls(self, client: Any, api_key: str, outputs: Sequence[RAGOutput]) -> list[PairResult]:
        from open_rag_eval.hhem.vectara_api import VectaraApiError, VectaraSettings, evaluate_factual_consistency

        options = self.options.vectara
        settings = VectaraSettings(options.base_url, options.language, options.timeout_s, options.max_retries)
        gate = asyncio.Semaphore(options.max_concurrency)
        refused: list[str] = []  # an auth refusal (401/403) fails the calls not yet made, without sending them

        async def one(output: RAGOutput) -> PairResult:
            async with gate:
                if refused:
                    return PairResult(error=refused[0])
                sources = [p.text for p in output.passages if p.text.strip()]
                try:
                    value = await evaluate_factual_consistency(client, settings, api_key, hypothesis_of(output), sources)
                except VectaraApiError as error:
                    if error.status in (401, 403):
                        refused.append(str(error))
                        self._log_once(str(error))
                    return PairResult(error=str(error))
                return PairResult(score=value, chunk_scores=[value])

        return list(await asyncio.gather(*(one(output) for output in outputs)))
