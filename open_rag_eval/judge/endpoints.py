"""Several endpoints serving one judge model (``judge.base_urls``): each call goes to the least-loaded one.

Each endpoint has its own pacing (a ``JudgeLimiter``: its ``max_concurrency``, or its share of a budget shared by
many processes) and its own HTTP pool. A call picks, attempt by attempt, the endpoint with the lowest load (calls in
flight and waiting over its concurrency limit), keeping away from one that just failed: an endpoint whose last
attempt failed (a 5xx, a timeout, no connection) is tried again only once every other endpoint is also cooling down
or after its cool-down (0.5 s, doubling with each failure in a row, at most 30 s). An endpoint that refuses us for
good (authentication, a redirect) is left out for the rest of the run; the judge is unavailable only when every
endpoint is. Replies are cached under the first endpoint's name, so a judgment is the same whichever endpoint
answered it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from open_rag_eval.judge.limits import JudgeLimiter

__all__ = ["COOL_DOWN_CAP_S", "Endpoint", "load", "pick"]

COOL_DOWN_S = 0.5
COOL_DOWN_CAP_S = 30.0


def load(limiter: JudgeLimiter) -> float:
    """Calls in flight and waiting for a slot, over the concurrency limit (0 when the limiter cannot say)."""
    concurrency = getattr(limiter, "concurrency", None)
    if concurrency is None:
        return 0.0
    waiting = getattr(limiter, "waiting", None)
    if waiting is None:
        waiting = len(getattr(concurrency, "_waiters", ()))
    return (concurrency.in_flight + waiting) / max(1, concurrency.limit)


@dataclass
class Endpoint:
    """One replica of the judge model."""

    base_url: str
    limiter: JudgeLimiter
    http: Any = None  # its HTTP client, built at its first call (or one given for every endpoint)
    strikes: int = 0  # attempts failed in a row
    failed_at: float = field(default=float("-inf"))
    down: str | None = None  # why it refuses us for good
    answered: bool = False  # it has given a judgment in this run

    @property
    def url(self) -> str:
        return self.base_url + "/chat/completions"

    def cooling(self, now: float) -> bool:
        return self.strikes > 0 and now - self.failed_at < min(COOL_DOWN_CAP_S, COOL_DOWN_S * 2 ** (self.strikes - 1))

    def succeeded(self) -> None:
        self.strikes = 0
        self.answered = True

    def failed(self) -> None:
        self.strikes += 1
        self.failed_at = time.monotonic()


def pick(endpoints: Sequence[Endpoint]) -> Endpoint | None:
    """The endpoint for the next attempt: not down; not cooling down unless all are; then the least loaded (the
    first on a tie). None when every endpoint is down."""
    now = time.monotonic()
    live = [(e.cooling(now), e.strikes if e.cooling(now) else 0, load(e.limiter), i)
            for i, e in enumerate(endpoints) if e.down is None]
    return endpoints[min(live)[-1]] if live else None
