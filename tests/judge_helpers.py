"""Shared helpers for the judge client tests (not a test module)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.judge.client import OpenAIJudge, open_judge
from open_rag_eval.judge.config import JudgeConfig

T = TypeVar("T")

FAST = {"backoff_base_s": 0.001, "backoff_cap_s": 0.002, "retry_after_cap_s": 0.05}


def config(base_url: str, **overrides: Any) -> JudgeConfig:
    return JudgeConfig(**{"model": "test-model", "base_url": base_url, "cache": False, **FAST, **overrides})


def ask(text: str = "grade this", task: str = "umbrela", **fields: Any) -> JudgeRequest:
    return JudgeRequest.chat(task, text, **fields)


def with_judge(cfg: JudgeConfig, body: Callable[[OpenAIJudge], Awaitable[T]], base_dir: Path = Path(".")) -> T:
    async def main() -> T:
        async with open_judge(cfg, base_dir=base_dir) as judge:
            return await body(judge)

    return asyncio.run(main())


async def outcome(judge: OpenAIJudge, request: JudgeRequest) -> Any:
    """The completion, or the exception it raised (so tests can look at both)."""
    try:
        return await judge.complete(request)
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return error
