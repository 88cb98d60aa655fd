"""The judge client's settings: one frozen value, built from the ``judge:`` section (``settings_for``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from open_rag_eval.core.wire import NO_KEY
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.limits import RetryPolicy

__all__ = ["NO_KEY", "SIMULATED_ENDPOINT", "JudgeSettings", "settings_for"]

SIMULATED_ENDPOINT = "simulated://judge"


@dataclass(frozen=True)
class JudgeSettings:
    """What the judge client reads, fixed for its life. ``base_urls``: the model's endpoints (the first names the
    cache keys unless ``cache_endpoint`` does); ``azure_*``: the endpoints are Azure OpenAI resources."""

    model: str
    base_urls: tuple[str, ...]
    api_key: str = NO_KEY
    key_name: str = "the API key variable"
    params: Mapping[str, Any] = field(default_factory=dict)
    drop_params: frozenset[str] = frozenset()
    timeout_s: float = 60.0
    max_reply_bytes: int = 8_000_000
    context_tokens: int | None = None
    max_tokens_param: str = "max_tokens"
    simulated: bool = False
    cache_endpoint: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    azure_api_version: str | None = None
    azure_deployment: str | None = None
    structured: str | None = None  # "json_schema" | "json_object": replies asked by each task's schema (judge.structured)
    reask: str = "corrective"  # how a re-ask after an unreadable reply is sent (judge.reask)

    @property
    def cache_name(self) -> str:
        """The endpoint named in cache keys: the simulated judge's port changes run to run; every replica of a
        model caches as the first, so a reply is the same whichever endpoint gave it."""
        if self.simulated:
            return SIMULATED_ENDPOINT
        return (self.cache_endpoint or self.base_urls[0]).rstrip("/")


def settings_for(config: JudgeConfig, urls: list[str], *, api_key: str) -> JudgeSettings:
    """The settings of a judge for ``config`` whose endpoints are ``urls`` and key ``api_key`` (simulated when the
    config starts the simulated judge: ``judge.simulated``)."""
    azure = config.azure
    return JudgeSettings(
        model=config.model, base_urls=tuple(url.rstrip("/") for url in urls), api_key=api_key,
        key_name=config.api_key_env, params=dict(config.params), drop_params=frozenset(config.drop_params),
        timeout_s=config.timeout_s, max_reply_bytes=int(config.max_reply_mb * 1_000_000),
        context_tokens=config.context_tokens, max_tokens_param=config.max_tokens_param,
        simulated=config.simulated is not None,
        retry=RetryPolicy(config.max_retries, config.backoff_base_s, config.backoff_cap_s, config.retry_after_cap_s),
        azure_api_version=None if azure is None else azure.api_version,
        azure_deployment=None if azure is None else azure.deployment or config.model,
        structured=config.structured, reask=config.reask)
