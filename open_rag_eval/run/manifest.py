"""manifest.json: exactly what produced a result -- versions, config (numbers and defaults resolved, other environment
references as written, never their values) and its
digest, input digest, prompt hashes, judge model and fingerprints, accounting, wall time, whether it was simulated."""

from __future__ import annotations

import hashlib
import platform
import sys
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from open_rag_eval.config import LoadedConfig, recorded_config
from open_rag_eval.judge.base import Judge
from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.core.redaction import safe_url, scrub_config

__all__ = ["build_manifest", "file_digest", "now_iso"]


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _prompt_hashes() -> dict[str, str]:
    try:
        from open_rag_eval.prompts import prompt_hashes
    except ImportError:
        return {}
    return prompt_hashes()


def _prompts_sent(accounting: Any) -> list[str]:
    """The ids of the templates the run's judge requests used (tracking logs only these)."""
    used = set(getattr(accounting, "prompts", ()) or ())
    return sorted(name for name, digest in _prompt_hashes().items() if digest in used)


def _judge_section(loaded: LoadedConfig, judge: Judge | None, info: RunInfo) -> dict[str, Any] | None:
    if judge is None:
        return None
    config = loaded.judge
    accounting = getattr(judge, "accounting", None)
    snapshot = accounting.snapshot() if accounting is not None else {}
    return {
        "model": judge.model,
        "base_url": safe_url(config.base_url) if config.base_url else config.base_url,
        "api_key_env": config.api_key_env,
        "simulated": info.simulated,
        "max_concurrency": config.max_concurrency,
        "fingerprints": snapshot.get("fingerprints", []),
    }


def build_manifest(
    loaded: LoadedConfig, counts: tuple[int, int], judge: Judge | None, info: RunInfo, *, wall_time_s: float,
    input_sha256: str | None = None, criteria: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The manifest of a run of ``counts`` (outputs, queries) whose run ``info`` was decided by the pipeline;
    ``input_sha256``: the digest of the input's bytes as the run read them (never the file's at the end);
    ``criteria``: the user's criteria the run judges by, as its evaluators declare them (``Contract.criteria``)."""
    accounting = getattr(judge, "accounting", None)
    input_path = loaded.resolve_path(loaded.config.input) if loaded.config.input else None
    return {
        "tool": "open-rag-eval",
        "tool_version": info.tool_version,
        "created": now_iso(),
        "python": sys.version.split()[0],
        "platform": platform.platform(terse=True),
        "config": scrub_config(recorded_config(loaded.raw)),  # URL credentials and literal credentials removed
        "config_digest": info.config_digest,
        "input": {
            "path": str(loaded.config.input) if input_path else None,
            "sha256": input_sha256 if input_path else None,
        },
        "n_outputs": counts[0],
        "n_queries": counts[1],
        "evaluators": [spec.type for spec in loaded.evaluators],
        "prompt_hashes": _prompt_hashes(),  # every template this version ships (what a rerun would use)
        "prompts_sent": _prompts_sent(accounting),
        **({"criteria": [dict(row) for row in criteria]} if criteria else {}),
        "judge": _judge_section(loaded, judge, info),
        "simulated": info.simulated,
        "accounting": accounting.snapshot() if accounting is not None else None,
        "wall_time_s": round(wall_time_s, 3),
    }
