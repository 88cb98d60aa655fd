"""The run's one judge, open for the run (the simulated server when the config asks for it; a recording or
replaying client when it tapes), and what the run's files say about the run once that judge has answered."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.judge.base import Judge
from open_rag_eval.judge.config import JudgeConfig, is_simulated_fingerprint

__all__ = ["judge_for", "judge_session", "run_info"]


@contextlib.asynccontextmanager
async def judge_for(loaded: LoadedConfig, needed: bool) -> AsyncIterator[Judge | None]:
    """The run's one judge (None when no evaluator needs one); the simulated server when the config asks for it."""
    if not needed:
        yield None
        return
    async with judge_session(loaded.judge, loaded.base_dir, str(loaded.path or "")) as judge:
        yield judge


@contextlib.asynccontextmanager
async def judge_session(config: JudgeConfig, base_dir: Path, file: str = "", **shared: Any) -> AsyncIterator[Judge]:
    """The judge ``config`` describes, open for the block; the simulated server when the config asks for it.
    ``shared``: a limiter, a cache and an endpoint index shared by many processes (``open_judge``)."""
    if config.simulated is None:
        try:
            judge = _open(config, base_dir, **shared)
        except ConfigError as error:  # the judge's checks know the YAML path; the config file is known here
            raise ConfigError(error.problem, path=error.path, file=error.file or file) from None
        async with judge:
            yield judge
        return
    from open_rag_eval.judge.simulated import SimulatedJudgeServer

    with SimulatedJudgeServer(config.simulated) as server:
        # the simulated judge answers under its own name unless the config names a model (never "gpt-4o-mini",
        # the default for a real judge, on results a real model never judged)
        model = config.model if "model" in config.model_fields_set else server.config.model
        simulated = config.model_copy(update={"base_url": server.base_url, "model": model})
        async with _open(simulated, base_dir, **shared) as judge:
            yield judge


def _open(config: JudgeConfig, base_dir: Path, **shared: Any) -> Any:
    """The judge client; a recording or replaying one when ``judge.record`` / ``judge.replay`` is set."""
    if config.replay is not None or config.record is not None:
        from open_rag_eval.judge.replay import open_taped_judge

        if shared:
            raise ConfigError("judge.record / judge.replay tape one process's calls: use executor: local",
                              path="judge.replay" if config.replay is not None else "judge.record")
        return open_taped_judge(config, base_dir=base_dir)
    from open_rag_eval.judge import open_judge

    return open_judge(config, base_dir=base_dir, **shared)


def run_info(loaded: LoadedConfig, judge: Judge | None) -> RunInfo:
    """What the run's files say about the run, decided here once the run's judge has answered (every writer is
    handed this value; nothing else decides whether a run was simulated)."""
    return RunInfo(simulated=_is_simulated(judge), config_digest=loaded.digest)


def _is_simulated(judge: Judge | None) -> bool:
    """Started as the simulated judge, or answered by one (a `simulate-judge` server named as base_url): its
    fingerprints carry a check a real endpoint's cannot pass by chance, whatever they start with."""
    if judge is None:
        return False
    accounting = getattr(judge, "accounting", None)
    seen = accounting.snapshot()["fingerprints"] if accounting is not None else []
    return judge.simulated or any(is_simulated_fingerprint(fp) for fp in seen)
