"""The server config (``open-rag-eval serve --config server.yaml``): database, data folder, judge profiles, limits.

Every section has a default, so ``open-rag-eval serve`` with no config runs on loopback with an embedded SQLite file
under ``.open-rag-eval/service/``. Judge profiles are the only way a job reaches a judge: clients name a profile,
never a URL or a key; a profile's key is the NAME of an environment variable, read when a job runs.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from open_rag_eval.core.errors import ConfigError

__all__ = ["Limits", "RunnerOptions", "Settings", "is_loopback", "load_settings"]

DEFAULT_DATA_DIR = ".open-rag-eval/service"
SIMULATED_PROFILE = {"model": "simulated-judge", "simulated": {}}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Limits(_Strict):
    max_body_mb: float = Field(16.0, gt=0, le=4096)  # a larger request body is refused (413)
    max_active_jobs: int = Field(4, ge=1)  # per tenant: queued + running jobs; more is 429 with Retry-After
    max_outputs_per_job: int = Field(10_000, ge=1)  # per job; more is 429 (a quota, not a malformed request)
    evaluate_wait_s: float = Field(30.0, ge=0, le=600)  # longest wait of POST /v1/evaluate before it answers 202
    retry_after_s: int = Field(5, ge=1)
    max_line_mb: float = Field(16.0, gt=0, le=4096)  # a longer line of an input (inline or uploaded) is 413
    max_columns: int = Field(1000, ge=1)  # a CSV input with more columns is 422
    max_cells: int = Field(10_000_000, ge=1)  # rows x columns of a CSV input; more is 413
    max_uploads: int = Field(100, ge=1)  # per tenant: stored uploads; more is 429 quota_uploads
    max_upload_mb_total: float = Field(2048.0, gt=0)  # per tenant: bytes of stored uploads; more is 429


class RunnerOptions(_Strict):
    jobs: int = Field(2, ge=0, le=256)  # jobs run at once by one process (0: this server only queues)
    poll_s: float = Field(0.5, gt=0, le=60)  # how often an idle runner looks for queued work
    heartbeat_s: float = Field(2.0, gt=0, le=600)  # how often a running job's claim is renewed
    stale_after_s: float = Field(30.0, gt=0, le=86_400)  # a claim not renewed for this long is taken over
    # deployment: a judge profile's max_concurrency, requests and tokens per minute hold across every job, worker
    # and replica sharing the database; process: per process (each process its own budget)
    judge_budget: Literal["deployment", "process"] = "deployment"


class Retention(_Strict):
    default_days: float | None = Field(None, gt=0)  # every tenant's finished jobs older than this are removed
    tenants: dict[str, float] = {}  # tenant -> days, over default_days
    every_s: float = Field(3600.0, gt=0, le=86_400)  # how often each runner sweeps

    @field_validator("tenants")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        for tenant, days in value.items():
            if not days > 0:
                raise ValueError(f"retention.tenants.{tenant}: days must be more than 0")
        return value


class Settings(_Strict):
    database_url: str | None = None  # None: sqlite+aiosqlite:///<data_dir>/service.sqlite
    data_dir: str = DEFAULT_DATA_DIR  # job folders, uploads, per-tenant judge caches, sweep histories
    auth: bool = False  # require API keys; forced on for a non-loopback host
    judge_profiles: dict[str, dict[str, Any]] = Field(default_factory=lambda: {"simulated": dict(SIMULATED_PROFILE)})
    default_judge_profile: str | None = None  # None: the first profile
    configs: dict[str, str] = {}  # name -> server-side YAML config a job may name instead of sending one
    inline_evaluators: list[str] = ["trec"]  # evaluator types a client-sent config may use
    connector_allow: list[str] = []  # URL prefixes a client-sent http connector may query (SSRF guard)
    limits: Limits = Field(default_factory=Limits)
    runner: RunnerOptions = Field(default_factory=RunnerOptions)
    retention: Retention = Field(default_factory=Retention)  # none by default: jobs are kept until deleted
    base_dir: Path = Field(default_factory=Path.cwd, exclude=True)

    @field_validator("connector_allow")
    @classmethod
    def _normalised_prefixes(cls, value: list[str]) -> list[str]:
        for prefix in value:
            if not normalised_url(prefix):
                raise ValueError(f"{prefix!r} is not an http(s) URL with a normalised path of unreserved characters "
                                 "and '/' (no %-encoding, ';', '\\', '.' or '..' segment): no URL would match it")
        return value

    @field_validator("judge_profiles")
    @classmethod
    def _some_profile(cls, value: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if not value:
            raise ValueError("name at least one judge profile")
        from open_rag_eval.judge.config import JudgeConfig

        for name, section in value.items():
            if "cache" in section:
                raise ValueError(f"judge_profiles.{name}.cache: the server keeps one judge cache per tenant")
            JudgeConfig.model_validate(section)
        return value

    def resolve(self, value: str) -> Path:
        path = Path(os.path.expanduser(value))
        return path if path.is_absolute() else self.base_dir / path

    @property
    def data_path(self) -> Path:
        return self.resolve(self.data_dir)

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite+aiosqlite:///{self.data_path / 'service.sqlite'}"

    @property
    def sqlite(self) -> bool:
        return self.db_url.startswith("sqlite")

    @property
    def profile_names(self) -> list[str]:
        return list(self.judge_profiles)

    def profile(self, name: str | None) -> str:
        chosen = name or self.default_judge_profile or self.profile_names[0]
        if chosen not in self.judge_profiles:
            raise ConfigError(f"unknown judge profile {chosen!r}; this server has: {', '.join(self.profile_names)}",
                              path="judge_profile")
        return chosen

    def connector_allowed(self, url: str) -> bool:
        """Whether ``url`` is under an allowed prefix: same scheme, host and port, the prefix's path, no userinfo."""
        return any(_under(url, prefix) for prefix in self.connector_allow)


_NORMAL_PATH = re.compile(r"(?:/[A-Za-z0-9._~-]+)*/?")  # RFC 3986 unreserved characters and "/", nothing encoded


def _parts(url: str) -> tuple[str, str, int | None, str] | None:
    """(scheme, host, port, path) of a URL the allow-list can judge, None for any other: a path must be normalised
    and made of unreserved characters and ``/`` only (no ``%``-encoding, no ``;`` parameters, no backslash, no
    ``.``/``..`` or empty segment), since servers and proxies disagree on what the rest means (Tomcat, Spring and
    several proxies read ``/rag/..;/admin`` as ``/admin``); no userinfo, no control character."""
    from urllib.parse import urlsplit

    if any(ord(char) <= 0x20 or ord(char) == 0x7F for char in url) or "\\" in url:  # urlsplit drops tabs silently
        return None
    try:
        split = urlsplit(url)
        port = split.port or {"http": 80, "https": 443}.get(split.scheme)
    except ValueError:
        return None
    path = split.path or "/"
    if split.scheme not in ("http", "https") or not split.hostname or "@" in split.netloc:
        return None
    if not _NORMAL_PATH.fullmatch(path) or {".", ".."} & set(path.split("/")):
        return None
    return split.scheme, split.hostname.lower(), port, path


def normalised_url(url: str) -> bool:
    """Whether the allow-list can judge ``url`` (``_parts``): a prefix that is not is refused at start."""
    return _parts(url) is not None


def _under(url: str, prefix: str) -> bool:
    """Only normalised paths are judged: ``/rag/%2e%2e/admin``, ``/rag/..;/admin`` and ``/rag/..\\admin`` are
    never under ``/rag/``."""
    candidate, allowed = _parts(url), _parts(prefix)
    if candidate is None or allowed is None:
        return False
    path, root = candidate[3], allowed[3]
    inside = path.startswith(root) if root.endswith("/") else path == root or path.startswith(root + "/")
    return candidate[:3] == allowed[:3] and inside


def is_loopback(host: str) -> bool:
    if host in ("localhost", "::1"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_settings(path: Path | None) -> Settings:
    """The server config at ``path`` (None: the defaults); errors name the file and the YAML path."""
    from open_rag_eval.config import read_config_text, parse_yaml
    from open_rag_eval.config.guard import config_error

    if path is None:
        return Settings()
    raw = parse_yaml(read_config_text(path), str(path))
    try:
        return Settings.model_validate({**raw, "base_dir": Path(path).resolve().parent})
    except ValidationError as error:
        raise config_error(error, Settings, str(path)) from None
