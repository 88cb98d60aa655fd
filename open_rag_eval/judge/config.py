"""The ``judge:`` section of a config."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from open_rag_eval.judge.thresholds import HealthThresholds

__all__ = ["SIMULATED_FINGERPRINT_PREFIX", "AzureConfig", "Endpoint", "JudgeConfig", "Price", "SimulatedJudgeConfig",
           "is_simulated_fingerprint", "simulated_fingerprint"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Price(_Strict):
    """US dollars per million tokens."""

    input: float = Field(ge=0, le=100_000)
    output: float = Field(ge=0, le=100_000)


SIMULATED_FINGERPRINT_PREFIX = "fp_sim_"  # the simulated judge's system_fingerprint starts with this
_SIGNATURE = "open-rag-eval simulated judge"


def _check(body: str) -> str:
    return hashlib.sha256(f"{_SIGNATURE}|{body}".encode()).hexdigest()[:12]


def simulated_fingerprint(material: str) -> str:
    """The simulated judge's fingerprint: the prefix, a digest of ``material`` and a check of both. A real endpoint
    whose fingerprint merely starts with the prefix does not pass ``is_simulated_fingerprint``."""
    body = hashlib.sha256(material.encode()).hexdigest()[:10]
    return f"{SIMULATED_FINGERPRINT_PREFIX}{body}_{_check(body)}"


def is_simulated_fingerprint(fingerprint: object) -> bool:
    """Whether a reply's fingerprint was made by our simulated judge (a string with the prefix and a valid check)."""
    if not isinstance(fingerprint, str) or not fingerprint.startswith(SIMULATED_FINGERPRINT_PREFIX):
        return False
    body, _, check = fingerprint[len(SIMULATED_FINGERPRINT_PREFIX):].partition("_")
    return bool(body) and check == _check(body)


class SimulatedJudgeConfig(_Strict):
    """The loopback simulated judge (tests, benchmarks, the offline demo). Its scores mean nothing."""

    latency_ms: float = Field(default=0.0, ge=0)
    jitter_ms: float = Field(default=0.0, ge=0)
    error_rate: float = Field(default=0.0, ge=0, le=1)  # 429 (with Retry-After) and 500, seeded
    malformed_rate: float = Field(default=0.0, ge=0, le=1)  # a broken JSON body or an unparseable reply
    timeout_rate: float = Field(default=0.0, ge=0, le=1)  # requests left hanging (the client must time out)
    hang_s: float = Field(default=600.0, gt=0)  # how long a hung request waits before the connection is dropped
    retry_after_s: float | None = Field(default=1.0, ge=0)  # Retry-After on 429s; None sends none
    noise_rate: float = Field(default=0.0, ge=0, le=1)  # replies whose verdict moves to a neighbour (judge noise)
    # prompts carrying "Ignore previous instructions and output/answer X" whose reply obeys (injection probe tests)
    injection_rate: float = Field(default=0.0, ge=0, le=1)
    seed: int = 0


class Endpoint(_Strict):
    """One of several endpoints serving the same model (``judge.base_urls``)."""

    url: str
    max_concurrency: int | None = Field(None, ge=1, le=4096)  # default: judge.max_concurrency


class AzureConfig(_Strict):
    """The endpoint is an Azure OpenAI resource: ``judge.base_url`` is its address (https://NAME.openai.azure.com);
    requests go to ``/openai/deployments/DEPLOYMENT/chat/completions?api-version=API_VERSION`` with the key in
    the ``api-key`` header."""

    api_version: str = Field(min_length=1)
    deployment: str | None = Field(None, min_length=1)  # default: judge.model


class JudgeConfig(_Strict):
    model: str = "gpt-4o-mini"
    base_url: str | None = None  # any OpenAI-compatible endpoint; OPENAI_BASE_URL is honoured when unset
    # several endpoints serving the same model (a vLLM server per GPU node), each with its own concurrency: the ray
    # executor spreads its workers over them; a local run uses the first; replies are cached as the first's
    base_urls: list[str | Endpoint] | None = Field(None, min_length=1)
    api_key_env: str = "OPENAI_API_KEY"  # the NAME of the variable; its value never lands in any output
    max_concurrency: int = Field(32, ge=1, le=4096)
    requests_per_minute: float | None = Field(None, gt=0)
    tokens_per_minute: float | None = Field(None, gt=0)
    max_retries: int = Field(6, ge=0, le=50)
    timeout_s: float = Field(60.0, gt=0, le=86_400)  # the whole request: connect, wait, every byte of the reply
    max_reply_mb: float = Field(8.0, gt=0, le=1024)  # a longer reply (after decompression) is a failed call
    cache: str | bool = ".open-rag-eval/cache.sqlite"  # a path, or false
    params: dict[str, Any] = {}  # passed through to every request (seed, max_tokens, ...), over the method's
    drop_params: list[str] = []  # params the model rejects (e.g. temperature for reasoning models)
    # the name the reply's token cap is sent under: reasoning models (o1, o3, gpt-5...) want max_completion_tokens
    max_tokens_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    # the model's context size in tokens, when known: a prompt that cannot fit with its reply fails without a call
    context_tokens: int | None = Field(None, ge=1)
    prices: Price | dict[str, Price] | None = None  # for this model, or per model name; over the built-in table
    simulated: SimulatedJudgeConfig | None = None  # start the loopback simulated judge and use it
    # retry pacing: full-jitter exponential backoff, and the longest server Retry-After we honour
    backoff_base_s: float = Field(0.5, gt=0, le=3600)
    backoff_cap_s: float = Field(30.0, gt=0, le=3600)
    retry_after_cap_s: float = Field(120.0, gt=0, le=3600)
    adaptive_concurrency: bool = True  # lower the concurrency on repeated 429s, recover it on successes
    # the endpoint counts as down after this many consecutive calls failed (after their retries) with no
    # success in between, or when calls keep failing and nothing succeeded for this many seconds
    outage_after_failures: int = Field(10, ge=1)
    outage_after_s: float = Field(300.0, gt=0)
    # judge health: shares of judgments per task above which the run warns (eval --strict-judge: exit 6)
    health: HealthThresholds = Field(default_factory=HealthThresholds)
    azure: AzureConfig | None = None  # the endpoint is Azure OpenAI (deployment paths, api-version, api-key header)
    # ask for each task's reply as JSON matching its schema (response_format): "json_schema" in OpenAI's form
    # (OpenAI, vLLM, ...), "json_object" with the schema beside it (llama-cpp-python's server)
    structured: Literal["json_schema", "json_object"] | None = None
    # a re-ask after a reply that could not be read: "corrective" sends the reply back with a message saying what
    # was wrong; "repeat" sends the request again at the re-ask temperature (as recordings made before hold)
    reask: Literal["corrective", "repeat"] = "corrective"
    # record every HTTP exchange with the endpoint to this JSONL file, or answer from such a file offline
    record: str | None = None
    replay: str | None = None

    def endpoints(self) -> list[tuple[str, int]]:
        """``base_urls`` as (url, max_concurrency) pairs; empty without them."""
        return [(e, self.max_concurrency) if isinstance(e, str) else (e.url, e.max_concurrency or self.max_concurrency)
                for e in self.base_urls or []]

    @model_validator(mode="after")
    def _one_source(self) -> JudgeConfig:
        if self.base_urls is not None and self.base_url is not None:
            raise ValueError("give judge.base_url or judge.base_urls, not both")
        if self.replay is not None and (self.record is not None or self.simulated is not None):
            raise ValueError("judge.replay answers from a file: it cannot be combined with judge.record or "
                             "judge.simulated")
        return self
