"""Vectara's factual-consistency API (``POST /v2/evaluate_factual_consistency``), an alternative HHEM backend.

Request ``{"generated_text": str, "source_texts": [str, ...], "language"?: "eng"}`` with the key in the
``x-api-key`` header; reply ``{"score": 0..1, "p_consistent": .., "p_inconsistent": ..}``. The passages are
sent as separate source texts (the API combines them), not joined and cut.

Errors: 429, 5xx and transport errors are retried with full-jitter exponential backoff (honouring
``Retry-After``) at most ``max_retries`` times; any other 4xx fails at once (a bad key or request does not
heal by retrying). A reply without a numeric ``score`` in [0, 1] is a failure, never a guess.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Any

from open_rag_eval.core.redaction import cut

__all__ = ["VectaraApiError", "VectaraSettings", "evaluate_factual_consistency"]

PATH = "/v2/evaluate_factual_consistency"


class VectaraApiError(Exception):
    """One evaluation failed for good; ``retryable`` says whether it ran out of retries."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status, self.retryable = status, retryable


@dataclass(frozen=True)
class VectaraSettings:
    base_url: str = "https://api.vectara.io"
    language: str | None = None  # ISO 639-3, e.g. "eng"; omitted: the API's default
    timeout_s: float = 30.0
    max_retries: int = 3
    backoff_base_s: float = 1.0
    backoff_cap_s: float = 30.0

    @property
    def endpoint(self) -> str:
        return self.base_url.rstrip("/") + PATH


def _delay(settings: VectaraSettings, attempt: int, retry_after: str | None) -> float:
    if retry_after is not None:
        try:
            return min(max(float(retry_after), 0.0), settings.backoff_cap_s)
        except ValueError:
            pass
    return random.uniform(0, min(settings.backoff_cap_s, settings.backoff_base_s * 2**attempt))


def parse_score(body: Any) -> float:
    score = body.get("score") if isinstance(body, dict) else None
    if isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
        raise VectaraApiError(f"reply has no score in [0, 1] (keys: {sorted(body) if isinstance(body, dict) else '-'})")
    return float(score)


async def _post_once(client: Any, settings: VectaraSettings, api_key: str, payload: dict[str, Any]) -> Any:
    import httpx2

    from open_rag_eval.transport import ReplyRefused

    try:
        return await client.post(
            settings.endpoint, json=payload, timeout=settings.timeout_s,
            headers={"x-api-key": api_key, "Accept": "application/json"},
        )
    except httpx2.TransportError as error:
        raise VectaraApiError(f"{type(error).__name__} calling the Vectara API", retryable=True) from None
    except ReplyRefused as error:  # too large, a redirect: the same server would send it again
        raise VectaraApiError(f"Vectara API {error.reason}", retryable=False) from None


async def evaluate_factual_consistency(
    client: Any, settings: VectaraSettings, api_key: str, generated_text: str, source_texts: list[str]
) -> float:
    """The API's score for one answer against its sources; raises VectaraApiError with the reason."""
    payload: dict[str, Any] = {"generated_text": generated_text, "source_texts": source_texts}
    if settings.language:
        payload["language"] = settings.language
    for attempt in range(settings.max_retries + 1):
        retry_after = None
        try:
            response = await _post_once(client, settings, api_key, payload)
        except VectaraApiError as error:
            if not error.retryable:
                raise
            failure = error
        else:
            if response.status_code == 200:
                try:
                    return parse_score(response.json())
                except (ValueError, RecursionError):
                    raise VectaraApiError("reply is not JSON", status=200) from None
            retryable = response.status_code == 429 or response.status_code >= 500
            failure = VectaraApiError(
                f"Vectara API answered HTTP {response.status_code}: {cut(response.text, 200)}",
                status=response.status_code, retryable=retryable,
            )
            if not retryable:
                raise failure
            retry_after = response.headers.get("retry-after")
        if attempt < settings.max_retries:
            await asyncio.sleep(_delay(settings, attempt, retry_after))
    raise VectaraApiError(f"{failure} (after {settings.max_retries} retries)", status=failure.status, retryable=True)
