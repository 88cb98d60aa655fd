"""What the in-process connectors (LangChain, LlamaIndex) share.

- ``load_target(spec, methods)``: the object ``"module:attr"`` names -- used as it is when it has one of ``methods``,
  else called with no arguments (a factory) and its result used; anything else is a config error naming the option.
- ``fetch_each(queries, repeats, options, ask)``: ``ask(query)`` once per (query, run), at most ``concurrency`` at a
  time, each within ``timeout_s``; an exception or a timeout becomes an output with ``error`` set to the reason.
- ``make_output``: the answer text segmented into statements, ``[n]`` markers resolved against the passages.
- ``refusal_flag``: the system's own "I declined to answer" flag (``RAGOutput.refused``), as the HTTP connector's
  ``refused_path`` reads it: true or false, null/None when the system does not say; anything else is a malformed
  result (a failed output naming the field), never guessed.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from open_rag_eval import ConfigError, MissingDependency, Passage, RAGOutput, cut, segment_answer

__all__ = ["InProcessOptions", "Malformed", "Reply", "fetch_each", "load_target", "make_output", "number",
           "refusal_flag", "require", "unique_ids"]

Reply = tuple[str, tuple[Passage, ...], bool | None]  # answer text, passages, the system's refused flag


class InProcessOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    concurrency: int = Field(4, ge=1, le=256)
    timeout_s: float = Field(300.0, gt=0, le=86_400)  # one call of the system, in total


class Malformed(ValueError):
    """A result that cannot be mapped to an output."""


def require(module: str, extra: str) -> Any:
    """Import a framework package lazily; a missing one names the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingDependency(module, extra) from None


def load_target(spec: str, methods: Sequence[str], *, option: str) -> Any:
    """The object ``spec`` names, or what calling it with no arguments returns (a factory)."""
    path = f"connector.options.{option}"
    if ":" not in spec:
        raise ConfigError(f"expected 'module:attr', got {spec!r}", path=path)
    target = _imported(spec, path)
    if not any(hasattr(target, name) for name in methods) and callable(target):
        try:
            target = target()
        except Exception as error:  # the user's factory failed: say so, with its reason
            raise ConfigError(f"calling {spec}() failed: {type(error).__name__}: {cut(str(error), 200)}",
                              path=path) from None
    if not any(hasattr(target, name) for name in methods):
        raise ConfigError(f"{spec} has none of {', '.join(methods)} (got {type(target).__name__})", path=path)
    return target


def _imported(spec: str, path: str) -> Any:
    """The attribute ``"module:attr"`` names; the module imports from the working folder too, as with python -m."""
    module_name, _, attr = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ConfigError(f"cannot import connector module '{module_name}': {error}", path=path) from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ConfigError(f"module '{module_name}' has no connector '{attr}'", path=path) from None


async def fetch_each(queries: Sequence[tuple[str, str]], repeats: int, options: InProcessOptions,
                     ask: Callable[[str], Awaitable[Reply]]) -> list[RAGOutput]:
    """One output per (query, run), in query order then run order."""
    limit = asyncio.Semaphore(options.concurrency)

    async def one(qid: str, query: str, run: int) -> RAGOutput:
        async with limit:
            started = time.perf_counter()
            try:
                answer, passages, refused = await asyncio.wait_for(ask(query), options.timeout_s)
            except asyncio.TimeoutError:
                return RAGOutput(query_id=qid, query=query, run=run, error=f"timed out after {options.timeout_s:g}s")
            except Malformed as error:
                return RAGOutput(query_id=qid, query=query, run=run, error=f"malformed result: {cut(str(error), 300)}")
            except Exception as error:  # the system's own failure: kept as a failed output with its reason
                return RAGOutput(query_id=qid, query=query, run=run,
                                 error=f"{type(error).__name__}: {cut(str(error), 300)}")
            return make_output(qid, query, run, answer, passages, (time.perf_counter() - started) * 1000, refused)

    return list(await asyncio.gather(*(one(qid, q, run) for qid, q in queries for run in range(1, repeats + 1))))


def make_output(qid: str, query: str, run: int, answer: str, passages: tuple[Passage, ...],
                latency_ms: float, refused: bool | None = None) -> RAGOutput:
    parts = segment_answer(answer, [p.id for p in passages]) if answer.strip() else ()
    return RAGOutput(query_id=qid, query=query, run=run, passages=passages, answer=parts, answer_text=answer,
                     latency_ms=round(latency_ms, 3), refused=refused)


def refusal_flag(value: Any, what: str) -> bool | None:
    """``value`` as the system's refused flag: True, False or None (not said); anything else is ``Malformed``."""
    if value is not None and not isinstance(value, bool):
        raise Malformed(f"{what} is not true, false or null (got {type(value).__name__})")
    return value


def unique_ids(ids: Sequence[str]) -> list[str]:
    """Ids as given; a repeated one (two chunks of one document) gets ``#2``, ``#3``... in order."""
    seen: dict[str, int] = {}
    out = []
    for pid in ids:
        seen[pid] = seen.get(pid, 0) + 1
        out.append(pid if seen[pid] == 1 else f"{pid}#{seen[pid]}")
    return out


def number(value: Any, what: str) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise Malformed(f"{what} is not a number (got {type(value).__name__})") from None
