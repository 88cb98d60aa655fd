"""Per-task and total judge accounting: calls, cache hits, retries, failures, tokens and cost.

Prices are US dollars per million tokens. The built-in table covers common OpenAI models (list prices,
standard tier); ``judge.prices`` overrides it. A model whose price is unknown gets ``cost_usd: None`` --
never a guessed price.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from open_rag_eval.judge.config import Price

__all__ = ["DEFAULT_PRICES", "Accounting", "TaskStats", "price_for"]

DEFAULT_PRICES: dict[str, Price] = {
    name: Price(input=price_in, output=price_out)
    for name, (price_in, price_out) in {
        "gpt-4o": (2.50, 10.00),
        "gpt-4o-mini": (0.15, 0.60),
        "gpt-4.1": (2.00, 8.00),
        "gpt-4.1-mini": (0.40, 1.60),
        "gpt-4.1-nano": (0.10, 0.40),
        "gpt-5": (1.25, 10.00),
        "gpt-5-mini": (0.25, 2.00),
        "gpt-5-nano": (0.05, 0.40),
        "o1": (15.00, 60.00),
        "o1-mini": (1.10, 4.40),
        "o3": (2.00, 8.00),
        "o3-mini": (1.10, 4.40),
        "o4-mini": (1.10, 4.40),
        "gpt-4-turbo": (10.00, 30.00),
        "gpt-3.5-turbo": (0.50, 1.50),
    }.items()
}

_SNAPSHOT = re.compile(r"-[0-9]{4}-[0-9]{2}-[0-9]{2}$")  # dated snapshots share their family's price


def price_for(model: str, overrides: Price | Mapping[str, Price] | None = None) -> Price | None:
    """The price of ``model``: a single override, else the override table, else the built-in table."""
    if isinstance(overrides, Price):
        return overrides
    for table in (overrides or {}, DEFAULT_PRICES):
        for name in (model, _SNAPSHOT.sub("", model)):
            if name in table:
                return table[name]
    return None


@dataclass
class TaskStats:
    calls: int = 0  # requests that went to the API (each counted once, however many attempts)
    cache_hits: int = 0
    deduplicated: int = 0  # answered by an identical request already in flight
    retries: int = 0  # extra attempts
    failures: int = 0  # requests that ended in an error
    prompt_tokens: int = 0
    completion_tokens: int = 0
    usage_unknown: int = 0  # replies without valid token counts: the cost of a priced model is then unknown
    # attempts given up on (timed out): the server may still have processed them, so their prompt tokens (our
    # estimate) are work done for nothing -- and, for a paid endpoint, possibly billed
    abandoned: int = 0
    abandoned_prompt_tokens: int = 0

    def add(self, other: TaskStats) -> None:
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class Accounting:
    """Counters of one judge. ``snapshot()`` is a plain, JSON-ready dict for the manifest and the summary."""

    model: str
    price: Price | None = None
    tasks: dict[str, TaskStats] = field(default_factory=dict)
    fingerprints: set[str] = field(default_factory=set)
    prompts: set[str] = field(default_factory=set)  # the sha256 of every prompt template the run's requests used

    def task(self, name: str) -> TaskStats:
        return self.tasks.setdefault(name, TaskStats())

    def usage(self, task: str, prompt_tokens: int | None, completion_tokens: int | None,
              fingerprint: str | None) -> None:
        """One reply's usage; ``None`` counts (missing or invalid in the reply) make the cost unknown, never $0."""
        stats = self.task(task)
        if prompt_tokens is None or completion_tokens is None:
            stats.usage_unknown += 1
        else:
            stats.prompt_tokens += prompt_tokens
            stats.completion_tokens += completion_tokens
        if isinstance(fingerprint, str) and fingerprint:
            self.fingerprints.add(fingerprint)

    def sent(self, task: str, attempt: int) -> None:
        """One attempt sent (by a relay, which counts what it pays): a request's call when it is its first, else a
        retry (each request one call, however many attempts)."""
        stats = self.task(task)
        if attempt:
            stats.retries += 1
        else:
            stats.calls += 1

    def abandoned(self, task: str, prompt_tokens: int) -> None:
        """One attempt given up on (a timeout) whose prompt, of about ``prompt_tokens``, the server may still read."""
        stats = self.task(task)
        stats.abandoned += 1
        stats.abandoned_prompt_tokens += prompt_tokens

    def cost(self, stats: TaskStats) -> float | None:
        if self.price is None or stats.usage_unknown:
            return None
        dollars = stats.prompt_tokens * self.price.input + stats.completion_tokens * self.price.output
        return round(dollars / 1_000_000, 8)

    def total(self) -> TaskStats:
        total = TaskStats()
        for stats in self.tasks.values():
            total.add(stats)
        return total

    def absorb(self, snapshot: dict[str, Any]) -> None:
        """Add the counters of another judge, given as its ``snapshot()`` (another process's, the run's controls)."""
        names = set(vars(TaskStats()))
        for task, row in snapshot["tasks"].items():
            self.task(task).add(TaskStats(**{k: v for k, v in row.items() if k in names}))
        self.fingerprints.update(snapshot["fingerprints"])
        self.prompts.update(snapshot.get("prompts", ()))

    def snapshot(self) -> dict[str, Any]:
        def row(stats: TaskStats) -> dict[str, Any]:
            return {**asdict(stats), "cost_usd": self.cost(stats)}

        return {
            "model": self.model,
            "price_per_million": None if self.price is None else self.price.model_dump(),
            "total": row(self.total()),
            "tasks": {name: row(stats) for name, stats in sorted(self.tasks.items())},
            "fingerprints": sorted(self.fingerprints),
            "prompts": sorted(self.prompts),
        }
