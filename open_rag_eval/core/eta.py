"""How long a run still takes, from a model of its remaining judge work (not from observed rates alone).

The run's plan (what ``--dry-run`` counts) gives each judge task's distinct requests for the whole run
(``Workload.calls``); the evaluators declare which tasks wait for which (``waits``: a nugget list waits for the
UMBRELA grades of its query's passages) and which ask one query's requests one after another (``in_turn``: nugget
creation, passage window after window). The judge gives the rest: how long a request takes now (``CallClock``: the
mean of the last requests answered, or the age of the requests still in flight when nothing has been answered for
four times that long (and 2 s), so a judge that stalls shows before its slow replies are in) and how many it runs at
once (its concurrency).

With R requests left (not answered yet: queued, in flight or not asked), C at a time, L seconds each, the judge
needs at least a = R·L/C; the longest chain of requests that wait for each other, D requests long, needs at least b
= D·L; a greedy schedule never needs more than a + b. The estimate, the geometric mean of max(a, b) and a + b, lies
within ×0.71 to ×1.41 of any time between those bounds. A request in flight counts for the part of ``L`` its age has
not used yet. Requests answered from the cache so far (their share per task) are taken to be answered from it in the
same share later, at no time.

There is no number (None: "ETA unknown") when the model cannot support one: before the plan is known, before the
judge has answered a request (no latency), without a known concurrency, or when a part of the run that is not judge
work is what remains (a local model, writing the results). No dependencies beyond the standard library.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["CallClock", "Workload", "estimate", "remaining_depth", "requests_per_wave"]

# a stall: nothing answered for this many mean latencies and at least this many seconds (shorter silences are a busy
# machine pausing this process, not the judge: bench/console_bench.py at a load of 12 on 2 cores)
STALL_MEANS, STALL_S = 4.0, 2.0


@dataclass(frozen=True)
class Workload:
    """The judge work of a whole run, as planned: distinct requests per task, which tasks wait for which, and how
    many requests of one query a task asks in turn (1 unless it says otherwise)."""

    calls: Mapping[str, int]
    waits: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    in_turn: Mapping[str, int] = field(default_factory=dict)
    stages: tuple[str, ...] = ()  # the evaluators that ask the judge, in the order they run on each window

    def chain(self, task: str) -> int:
        return max(1, self.in_turn.get(task, 1))


class CallClock:
    """When the judge's requests started and how long the last ones took. The judge's event loop writes it; a
    display thread reads it (each read takes a copy under a lock)."""

    def __init__(self, keep: int = 48, clock: Callable[[], float] = time.monotonic) -> None:
        self._done: deque[tuple[float, float]] = deque(maxlen=keep)  # (ended, seconds taken) of the last answered
        self._open: dict[int, float] = {}
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self.clock = clock
        self.answered = 0  # requests answered so far

    def begin(self) -> int:
        with self._lock:
            token = next(self._ids)
            self._open[token] = self.clock()
            return token

    def end(self, token: int) -> None:
        with self._lock:
            start = self._open.pop(token, None)
            if start is not None:
                now = self.clock()
                self._done.append((now, now - start))
                self.answered += 1

    def ages(self, now: float | None = None, since: float = float("-inf")) -> list[float]:
        """How long each request in flight (sent after ``since``) has been waiting, youngest first."""
        now = self.clock() if now is None else now
        with self._lock:
            return sorted(now - start for start in self._open.values() if start >= since)

    def latency(self, now: float | None = None, since: float = float("-inf"), least: int = 4) -> float | None:
        """Seconds a request takes now: the mean of the last answered; or, when nothing has been answered for
        ``STALL_MEANS`` times that and ``STALL_S`` seconds (a stall), the median age of the requests in flight if
        longer -- a judge that stalls shows before its replies do, while a straggler, or replies slowed by a busy
        machine but still coming, do not.
        Only requests sent (and answered) after ``since`` count (e.g. not those slowed by planning the run in the
        same process); None before ``least`` answered."""
        now = self.clock() if now is None else now
        ages = self.ages(now, since)
        with self._lock:
            done = [(ended, taken) for ended, taken in self._done if ended - taken >= since]
        if len(done) < least:
            return None
        recent = sum(taken for _, taken in done) / len(done)  # the mean: in flight over it is the throughput
        silent = now - max(ended for ended, _ in done)  # nothing answered for this long
        if ages and silent > max(STALL_MEANS * recent, STALL_S):  # the requests in flight say more than the replies
            return max(recent, ages[len(ages) // 2])
        return recent


def requests_per_wave(judge: Any, latency: float) -> float | None:
    """Requests the judge runs at once: its endpoints' concurrency limits (adaptive: as they are now), fewer when
    their requests-per-minute budgets allow fewer in ``latency`` seconds; None when the judge does not say (the
    judge of an executor's processes)."""
    waves = []
    for endpoint in getattr(judge, "endpoints", None) or []:
        if getattr(endpoint, "down", None) is not None:
            continue  # left out for the rest of the run
        limiter = getattr(endpoint, "limiter", None)
        limit = getattr(getattr(limiter, "concurrency", None), "limit", None)
        if not isinstance(limit, int):
            return None
        rate = getattr(getattr(limiter, "requests", None), "rate", None)  # requests per second, when paced
        waves.append(min(float(limit), rate * latency) if isinstance(rate, (int, float)) and rate > 0 else limit)
    return float(sum(waves)) or None


def remaining_depth(work: Workload, left: Mapping[str, float]) -> int:
    """The longest chain of requests still to answer: tasks with requests left, each after the tasks it waits for,
    each adding the requests one query asks of it in turn."""
    memo: dict[str, int] = {}

    def depth(task: str, seen: frozenset[str]) -> int:
        if task in memo:
            return memo[task]
        before = [depth(t, seen | {task}) for t in work.waits.get(task, ()) if t not in seen]
        own = work.chain(task) if left.get(task, 0) > 0 else 0
        memo[task] = own + max(before, default=0)
        return memo[task]

    return max((depth(task, frozenset()) for task in work.calls), default=0)


def estimate(work: Workload, made: Mapping[str, tuple[int, int]], latency: float | None, capacity: float | None,
             *, flight: Sequence[float] = (), pending: int = 0, stages_left: int = 0) -> float | None:
    """Seconds until the judge work of ``work`` is done. ``made``: task -> (calls sent, answered from the cache)
    so far; ``flight``: the ages of the requests in flight (each has about ``latency`` less its age to go);
    ``pending``: requests asked and not answered (queued or in flight: the judge's own count, a floor when the plan
    counted fewer); ``stages_left``: judged evaluator stages still to come after the running one (each adds at
    least one wave). None when ``latency`` or ``capacity`` is unknown."""
    if latency is None or not capacity or latency <= 0:
        return None
    left: dict[str, float] = {}
    for task, planned in work.calls.items():
        calls, hits = made.get(task, (0, 0))
        fresh = 1.0 - hits / (calls + hits) if calls + hits else 1.0  # the cache answers this share at no time
        left[task] = max(0, planned - calls - hits) * fresh
    queued = max(sum(left.values()), pending - len(flight))
    finishing = [max(0.0, latency - age) for age in flight]
    if queued <= 0 and not finishing:
        return 0.0
    depth = remaining_depth(work, left) + max(0, stages_left)
    spread = (queued * latency + sum(finishing)) / capacity  # the work, spread over the judge's slots
    deep = depth * latency if depth else max(finishing, default=0.0)  # the longest chain of waiting requests
    low, high = max(spread, deep), spread + deep
    return math.sqrt(low * high)  # within x0.71-x1.41 of any time between the bounds
