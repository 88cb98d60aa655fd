"""Ask the judge and parse the reply, re-asking a bounded number of times when the reply does not parse.

Shared by the TREC metrics. A call that fails for good (``JudgeCallError``) becomes a failed answer with its reason -- unless the endpoint
declined the request (an empty reply, a content filter: ``refused``), which the methods read as an empty completion;
``JudgeUnavailable`` propagates (the run stops). Re-asks use a distinct ``sample`` index so a cached bad reply is
never served again: attempt j of sample s uses index ``s + SAMPLE_STRIDE * j`` (attempt 0 keeps index s, which is
what makes the normal judgments and test-retest sample 0 share the cache).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from open_rag_eval.errors import JudgeCallError
from open_rag_eval.judge.base import Judge, JudgeRequest
from open_rag_eval.parsing import strip_reasoning

__all__ = ["SAMPLE_STRIDE", "Asked", "ask"]

T = TypeVar("T")
SAMPLE_STRIDE = 1000


@dataclass(frozen=True)
class Asked(Generic[T]):
    value: T | None
    status: str  # "ok" | "unparsed" | "failed"
    reason: str | None = None
    attempts: int = 0
    text: str | None = None  # the last raw reply


async def ask(
    judge: Judge,
    build: Callable[[float, int], JudgeRequest],
    parse: Callable[[str], T | None],
    *,
    trials: int = 1,
    temperatures: tuple[float, float] = (0.0, 0.2),
    sample: int = 0,
) -> Asked[T]:
    """Up to ``trials`` attempts: the first at ``temperatures[0]``, re-asks at ``temperatures[1]``."""
    text: str | None = None
    declined: str | None = None
    for attempt in range(max(1, trials)):
        temperature = temperatures[0] if attempt == 0 else temperatures[1]
        try:
            text = (await judge.complete(build(temperature, sample + SAMPLE_STRIDE * attempt))).text
        except JudgeCallError as error:
            if not error.refused:
                return Asked(None, "failed", f"judge call failed: {error}", attempt + 1, text)
            text, declined = "", f"the judge declined: {error}"
        value = parse(strip_reasoning(text))
        if value is not None:
            return Asked(value, "ok", declined, attempt + 1, text)
    return Asked(None, "unparsed", f"reply did not parse after {max(1, trials)} attempt(s)", max(1, trials), text)
