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

The judge's observed pace checks the model: the replies per second over the last ``PACE_WAVES`` waves of replies
(at least ``PACE_S`` seconds; ``CallClock.pace``) give a second estimate of the same bounds, the requests left at
that rate (``paced``). The model follows a change of latency within a wave but assumes every slot is busy, and on a
loaded machine its latency of the last replies swings (x0.4 to x2: a process that waits for a core answers in
bursts); the observed rate is steady there and sees slots left idle, but lags a change by its window. The ETA shown
is the geometric mean of the two (``blend``): within x1.5 of any time between them when they differ by at most
``PACE_SPREAD`` (x2.25).

There is no number (None, or "ETA unknown" with why) when the model cannot support one: before the plan is known;
before the judge's pace is (``PACE_WAVES`` waves of replies); without a known concurrency; while the two estimates
differ by more than ``PACE_SPREAD`` (the pace is changing); while the mean latency of the pace window's quarters
differs by more than ``PACE_SWING`` (x1.5: a judge that slows, other work that comes and goes); while the process
waits for a CPU more than ``BUSY`` of the time (``Lag``: its pace then follows work that is not its own); or when a
part of the run that is not judge work is what remains (a local model, writing the results). No dependencies beyond
the standard library.
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

__all__ = ["CallClock", "Lag", "Pace", "Workload", "blend", "estimate", "paced", "remaining_depth", "requests_per_wave"]

# a stall: nothing answered for this many mean latencies and at least this many seconds (shorter silences are a busy
# machine pausing this process, not the judge: bench/console_bench.py at a load of 12 on 2 cores)
STALL_MEANS, STALL_S = 4.0, 2.0
# the observed pace: replies per second over the last PACE_WAVES waves of replies and at least PACE_S seconds
PACE_WAVES, PACE_S = 8, 2.0
PACE_SPREAD = 2.25  # 1.5 / 0.67: the geometric mean of two estimates this far apart is within x1.5 of both
PACE_SWING = 1.5  # latency that varies more than this within the pace's window: no time can be promised
BUSY = 0.25  # a process that waits for a CPU more than this share of the time (``Lag``): no time can be promised
LATENCY_REPLIES = 48  # the latency is the mean of this many last replies


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

    def __init__(self, keep: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
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
            done = [(ended, taken) for ended, taken in self._done if ended - taken >= since][-LATENCY_REPLIES:]
        if len(done) < least:
            return None
        recent = sum(taken for _, taken in done) / len(done)  # the mean: in flight over it is the throughput
        silent = now - max(ended for ended, _ in done)  # nothing answered for this long
        if ages and silent > max(STALL_MEANS * recent, STALL_S):  # the requests in flight say more than the replies
            return max(recent, ages[len(ages) // 2])
        return recent


    def pace(self, replies: int, now: float | None = None, since: float = float("-inf"),
             least_s: float = PACE_S) -> Pace | None:
        """The judge's pace over the last ``replies`` answered after ``since``, and at least the last ``least_s``
        seconds (a window that starts after ``since``); None before ``replies`` have been answered in it."""
        now = self.clock() if now is None else now
        with self._lock:
            done = [(ended, taken) for ended, taken in self._done if ended > since]
        if len(done) < max(2, replies):
            return None
        start = max(min(done[-replies][0], now - least_s), since)
        if now <= start:
            return None
        kept = [(ended, taken) for ended, taken in done if ended > start]
        quarters: list[list[float]] = [[], [], [], []]
        for ended, taken in kept:
            quarters[min(3, int(4 * (ended - start) / (now - start)))].append(taken)
        means = [sum(q) / len(q) for q in quarters if q]
        swing = max(means) / min(means) if len(means) > 1 and min(means) > 0 else 1.0
        return Pace(len(kept) / (now - start), swing)


@dataclass(frozen=True)
class Pace:
    """How fast the judge answers: replies per second over a window, and how steady their latency is in it (the
    largest mean latency of the window's quarters over the smallest: 1 when steady)."""

    rate: float
    swing: float


class Lag:
    """How long this process waits for a CPU: a daemon thread sleeps ``tick`` seconds at a time and notes how late it
    wakes (a machine busy with other work, or busy threads of this process holding the interpreter)."""

    def __init__(self, tick: float = 0.1, keep: int = 256) -> None:
        self.tick = tick
        self._late: deque[tuple[float, float]] = deque(maxlen=keep)  # (woke, seconds late)
        self._stop = threading.Event()

    def start(self) -> Lag:
        threading.Thread(target=self._run, name="open-rag-eval-lag", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while True:
            before = time.monotonic()
            if self._stop.wait(self.tick):
                return
            woke = time.monotonic()
            self.note(woke, max(0.0, woke - before - self.tick))

    def note(self, woke: float, late: float) -> None:
        """The thread woke at ``woke``, ``late`` seconds after it meant to."""
        self._late.append((woke, late))

    def waiting(self, window: float = PACE_S, now: float | None = None) -> float | None:
        """The share of the last ``window`` seconds this process waited to run (None before it has woken)."""
        now = time.monotonic() if now is None else now
        late = [seconds for woke, seconds in list(self._late) if woke > now - window]
        return sum(late) / (len(late) * self.tick + sum(late)) if late else None


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
    """Seconds until the judge work of ``work`` is done, by the model. ``made``: task -> (calls sent, answered from the
    cache) so far; ``flight``: the ages of the requests in flight (each has about ``latency`` less its age to go);
    ``pending``: requests asked and not answered (queued or in flight: the judge's own count, a floor when the plan
    counted fewer); ``stages_left``: judged evaluator stages still to come after the running one (each adds at
    least one wave). None when ``latency`` or ``capacity`` is unknown."""
    if latency is None or not capacity or latency <= 0:
        return None
    queued, depth = _left(work, made, pending, len(flight), stages_left)
    finishing = [max(0.0, latency - age) for age in flight]
    if queued <= 0 and not finishing:
        return 0.0
    deep = depth * latency if depth else max(finishing, default=0.0)  # the longest chain of waiting requests
    return _between((queued * latency + sum(finishing)) / capacity, deep)  # the work over the judge's slots


def paced(work: Workload, made: Mapping[str, tuple[int, int]], latency: float, rate: float, *, in_flight: int = 0,
          pending: int = 0, stages_left: int = 0) -> float:
    """Seconds until the judge work of ``work`` is done at the observed ``rate`` (replies per second): the requests
    still to answer (left, queued and ``in_flight``) at that rate, and the longest chain at ``latency`` a request."""
    queued, depth = _left(work, made, pending, in_flight, stages_left)
    if queued <= 0 and not in_flight:
        return 0.0
    return _between((queued + in_flight) / rate, depth * latency if depth else latency)


def blend(model: float, observed: float) -> float | None:
    """The ETA shown: the geometric mean of the model's estimate and the one at the observed pace; None when they
    differ by more than ``PACE_SPREAD`` (the pace is changing)."""
    if model <= 0 or observed <= 0:  # both 0 when nothing is left
        return 0.0 if max(model, observed) <= 0 else None
    if max(model, observed) > PACE_SPREAD * min(model, observed):
        return None
    return math.sqrt(model * observed)


def _left(work: Workload, made: Mapping[str, tuple[int, int]], pending: int, in_flight: int,
          stages_left: int) -> tuple[float, int]:
    """(requests still to ask or queued, not in flight; the longest chain of them, with a wave per judged stage to
    come). Requests answered from the cache so far (their share per task) are taken to be answered from it in the
    same share later, at no time."""
    left: dict[str, float] = {}
    for task, planned in work.calls.items():
        calls, hits = made.get(task, (0, 0))
        fresh = 1.0 - hits / (calls + hits) if calls + hits else 1.0  # the cache answers this share at no time
        left[task] = max(0, planned - calls - hits) * fresh
    queued = max(sum(left.values()), pending - in_flight)
    return queued, remaining_depth(work, left) + max(0, stages_left)


def _between(spread: float, deep: float) -> float:
    """The geometric mean of the bounds max(spread, deep) and spread + deep: within x0.71-x1.41 of any time between."""
    return math.sqrt(max(spread, deep) * (spread + deep))
