"""The console's time left, from a model of the remaining judge work (core.eta): waves of requests at the judge's
latency and concurrency, the longest chain of requests that wait for each other, "ETA unknown" when the model
cannot support a number; and the run's judge work planned beside the run (run.workload)."""

from __future__ import annotations

import io
import json
import math
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from open_rag_eval.cli.console import ProgressDisplay
from open_rag_eval.cli.console import _duration
from open_rag_eval.core.eta import (CallClock, Lag, Pace, Workload, blend, estimate, paced, remaining_depth,
                                   requests_per_wave)
from open_rag_eval.core.progress import Progress
from open_rag_eval.judge.accounting import Accounting

TREC = Workload({"umbrela": 100, "nugget_create": 10, "support": 40},
                {"nugget_create": ("umbrela",)}, {"nugget_create": 2}, ("trec",))


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_time_left_is_waves_of_the_requests_left_and_the_chain_that_waits() -> None:
    made = {"umbrela": (36, 0), "support": (40, 0)}
    # 64 grades and 10 nugget lists left, 4 requests in flight 0.1 s old: (74 x 0.5 + 4 x 0.4) / 8 = 4.825 s of
    # work over 8 slots; the longest chain: one wave of grades, then a query's 2 creation requests in turn = 1.5 s
    spread, deep = (74 * 0.5 + 4 * 0.4) / 8, 3 * 0.5
    assert spread == 4.825 and deep == 1.5
    left = estimate(TREC, made, 0.5, 8, flight=[0.1] * 4)
    assert left == pytest.approx(math.sqrt(4.825 * (4.825 + 1.5)))  # 5.52 s: between 4.825 and 6.325
    assert remaining_depth(TREC, {"umbrela": 64, "nugget_create": 10}) == 3
    assert remaining_depth(TREC, {"umbrela": 0, "nugget_create": 10}) == 2
    # each judged stage still to come adds a wave to the chain
    assert estimate(TREC, made, 0.5, 8, stages_left=2) == pytest.approx(math.sqrt(4.625 * (4.625 + 2.5)))


def test_the_estimate_lies_within_a_third_of_any_time_its_bounds_allow() -> None:
    for queued, depth in ((1, 1), (10, 1), (100, 3), (3, 10), (1000, 0)):
        work = Workload({"a": queued}, in_turn={"a": depth} if depth else {})
        left = estimate(work, {}, 1.0, 4)
        assert left is not None
        chain = max(depth, 1)  # a task is at least one request deep
        low, high = max(queued / 4, chain), queued / 4 + chain
        assert low / 1.5 <= low * 0.707 <= left <= high * 1.415 <= high * 1.5


def test_cache_hits_pending_requests_and_what_makes_it_unknown() -> None:
    # half of the grades so far came from the cache: half of those left are taken to come from it, at no time
    cached = estimate(Workload({"umbrela": 100}), {"umbrela": (20, 20)}, 1.0, 10)
    assert cached == pytest.approx(math.sqrt(3.0 * 4.0))  # 30 fresh requests: 3 s of waves, then 1 wave of chain
    # the plan counted fewer than the judge was asked for: the judge's own queue is the floor
    assert estimate(Workload({"umbrela": 10}), {"umbrela": (10, 0)}, 1.0, 10, pending=50) == pytest.approx(
        math.sqrt(5.0 * 5.0))
    assert estimate(TREC, {}, None, 8) is None and estimate(TREC, {}, 0.5, None) is None
    assert estimate(Workload({"umbrela": 5}), {"umbrela": (5, 0)}, 0.5, 8) == 0.0  # nothing left to judge


def test_the_clock_times_requests_and_sees_a_stall_before_its_replies() -> None:
    clock = Clock()
    timing = CallClock(keep=8, clock=clock)
    assert timing.latency() is None
    tokens = [timing.begin() for _ in range(6)]
    clock.now += 0.5
    for token in tokens[:4]:
        timing.end(token)
    assert timing.latency(least=4) == pytest.approx(0.5) and timing.answered == 4
    assert timing.latency(since=clock.now - 0.1) is None  # requests sent before ``since`` do not count
    clock.now += 0.4  # two requests 0.9 s old: not yet twice the 0.5 s mean
    assert timing.latency() == pytest.approx(0.5) and timing.ages() == pytest.approx([0.9, 0.9])
    clock.now += 2.1  # half of those in flight are 3 s old, six times the mean: the judge stalls
    assert timing.latency() == pytest.approx(3.0)
    straggler = CallClock(clock=clock)
    answered = [straggler.begin() for _ in range(4)]
    clock.now += 0.5
    for token in answered:
        straggler.end(token)
    stuck = straggler.begin()
    straggler._open[stuck] -= 60  # one request a minute old among three young ones: not a stall
    for _ in range(3):
        straggler.begin()
    clock.now += 0.1
    assert straggler.latency() == pytest.approx(0.5)


def _endpoint(limit: int, rate: float | None = None, down: str | None = None) -> SimpleNamespace:
    requests = SimpleNamespace(rate=rate) if rate else None
    return SimpleNamespace(limiter=SimpleNamespace(concurrency=SimpleNamespace(limit=limit), requests=requests),
                           down=down)


def test_requests_per_wave_are_the_endpoints_concurrency_paced_by_their_budget() -> None:
    assert requests_per_wave(SimpleNamespace(endpoints=[_endpoint(8), _endpoint(4)]), 1.0) == 12
    assert requests_per_wave(SimpleNamespace(endpoints=[_endpoint(8, rate=2.0)]), 1.5) == 3.0  # 2 a second
    assert requests_per_wave(SimpleNamespace(endpoints=[_endpoint(8), _endpoint(4, down="401")]), 1.0) == 8
    assert requests_per_wave(SimpleNamespace(), 1.0) is None  # an executor's judge does not say


class TimedJudge:
    """What the display reads of a judge: its accounting, its request clock, its queue and its endpoints."""

    simulated = True

    def __init__(self, clock: Clock) -> None:
        self.accounting = Accounting("simulated-judge")
        self.timing = CallClock(clock=clock)
        self.pending = 0
        self.endpoints = [_endpoint(8)]


def test_the_display_shows_the_models_eta_or_says_why_it_is_unknown() -> None:
    clock = Clock()
    progress = Progress(clock=clock)
    progress.stages = ["read", "trec", "write"]
    progress.begin("read")
    progress.begin("trec")
    progress.outputs_total = 20
    judge = TimedJudge(clock)
    progress.judge = judge
    display = ProgressDisplay(progress, io.StringIO(), tty=False, clock=clock)
    assert display.stage_detail("trec", clock.now) == "0/20 outputs · ETA unknown (planning)"
    progress.planned(TREC)
    assert display.eta("trec", clock.now) == "ETA unknown (timing the judge)"
    for _ in range(4):
        token = judge.timing.begin()
        clock.now += 0.5
        judge.timing.end(token)
    # a latency, but not yet the judge's pace (8 waves of replies): the model alone is no number to show
    assert display.eta("trec", clock.now) == "ETA unknown (timing the judge)"
    for _ in range(8):
        tokens = [judge.timing.begin() for _ in range(8)]
        clock.now += 0.5
        for token in tokens:
            judge.timing.end(token)
    judge.accounting.task("umbrela").calls = 36
    judge.accounting.task("support").calls = 40
    # the model above with none in flight: 74 requests left, 4.625 s of waves, a chain of 3 waves of 0.5 s; the pace
    # (16 replies a second: 56 in the 3.5 s since the first of the last 64) says the same
    assert display.eta("trec", clock.now) == f"ETA {math.sqrt(4.625 * 6.125):.1f}s" == "ETA 5.3s"
    progress.report("trec", "model HHEM", 0)
    assert display.eta("trec", clock.now) == "ETA unknown (HHEM model running)"  # its time is not modelled
    progress.report("trec", "model HHEM done", 0)
    for task, planned in TREC.calls.items():
        judge.accounting.task(task).calls = planned
    assert display.eta("trec", clock.now) == "ETA unknown (past the planned judge work)"


def _write_run(folder: Path, n: int) -> Path:
    rows = []
    for i in range(n):
        docs = [{"id": f"d{j}", "text": f"Fact {j} about topic {i}: it is studied widely."} for j in range(3)]
        rows.append(json.dumps({"query_id": f"q{i}", "query": f"What about topic {i}?", "passages": docs,
                                "answer": [{"text": f"Topic {i} is studied widely.", "citations": ["d0"]}]}))
    (folder / "in.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    config = folder / "c.yaml"
    config.write_text("input: in.jsonl\noutput_dir: out\njudge: {model: simulated-judge, cache: false, simulated: "
                      "{latency_ms: 0, seed: 1}}\nevaluators: [{type: trec, metrics: [umbrela, nuggets, citation, "
                      "no_answer]}]\n", encoding="utf-8")
    return config


def test_the_run_plans_its_judge_work_beside_it_as_the_dry_run_counts_it(tmp_path: Path) -> None:
    """A run of 12 outputs (all its queries planned): the workload the console's ETA rests on is the requests the
    run then sent, task by task (the judge-health controls included), with the trec evaluator's order."""
    from open_rag_eval.config import load_config
    from open_rag_eval.run.pipeline import run

    progress = Progress()
    run(load_config(_write_run(tmp_path, 12)), progress=progress)
    waited = 0.0
    while progress.work is None and waited < 60:  # the planning thread may end after a quick run
        time.sleep(0.1)
        waited += 0.1
    work = progress.work
    assert work is not None and work.stages == ("trec",)
    sent = {task: row["calls"] for task, row in progress.judge.accounting.snapshot()["tasks"].items()}
    assert dict(work.calls) == sent
    assert work.waits["nugget_assign"] == ("nugget_importance",) and work.in_turn == {"nugget_create": 1}


def test_a_large_run_is_planned_on_a_sample_of_its_queries_scaled(tmp_path: Path) -> None:
    from open_rag_eval.config import load_config
    from open_rag_eval.run.pipeline import load_outputs
    from open_rag_eval.run.workload import PLANNED_QUERIES, workload

    loaded = load_config(_write_run(tmp_path, 3 * PLANNED_QUERIES))
    outputs = load_outputs(loaded)
    whole, sampled = workload(loaded, outputs, len(outputs)), workload(loaded, outputs[:PLANNED_QUERIES], len(outputs))
    # every query asks the same here (3 grades, a nugget list, its importance, one assignment, one no-answer, one
    # support): the sample scales to the whole; the controls' own requests (drawn from the outputs given, some of
    # them the metric's own requests) are counted as they are, so their tasks may differ by a control or two
    assert whole.calls["nugget_create"] == sampled.calls["nugget_create"] == 3 * PLANNED_QUERIES
    assert whole.calls["nugget_importance"] == sampled.calls["nugget_importance"] == 3 * PLANNED_QUERIES
    for task, n in whole.calls.items():
        assert abs(sampled.calls[task] - n) <= 10, (task, sampled.calls[task], n)


def test_old_requests_in_flight_are_no_stall_while_replies_still_come() -> None:
    """A busy machine: half the requests in flight are old, but replies keep coming: the latency is their mean."""
    clock = Clock()
    timing = CallClock(clock=clock)
    old = [timing.begin() for _ in range(4)]
    clock.now += 2.0
    for _ in range(4):
        token = timing.begin()
        clock.now += 0.5
        timing.end(token)  # one reply every 0.5 s, each 0.5 s long
    assert timing.ages() == pytest.approx([4.0] * 4) and timing.latency() == pytest.approx(0.5)
    clock.now += 1.5  # then nothing for 1.5 s, three times the mean: a busy machine's pause, not yet a stall
    assert timing.latency() == pytest.approx(0.5)
    clock.now += 1.0  # nothing for 2.5 s, five times the mean: a stall, the requests in flight say 6.5 s
    assert timing.latency() == pytest.approx(6.5) and old


def test_the_observed_rate_counts_the_last_replies_over_at_least_its_window() -> None:
    clock = Clock()
    timing = CallClock(clock=clock)
    for _ in range(40):  # a reply every 0.25 s for 10 s: 4 a second
        token = timing.begin()
        clock.now += 0.25
        timing.end(token)
    assert timing.pace(50) is None  # fewer replies than asked for
    # the last 4 replies span 0.75 s, less than the 2 s window: the 8 replies of the last 2 s count
    assert timing.pace(4, least_s=2.0) == Pace(8 / 2.0, 1.0)
    # the last 20 replies: the 19 after the first of them, in the 4.75 s since it
    assert timing.pace(20, least_s=2.0) == Pace(19 / 4.75, 1.0)
    # only replies after ``since`` count, over a window that starts there
    assert timing.pace(4, since=clock.now - 1.0, least_s=2.0) == Pace(4 / 1.0, 1.0)
    clock.now += 2.0  # two silent seconds: the rate falls
    assert timing.pace(4, least_s=2.0) == Pace(3 / 2.75, 1.0)
    for seconds in (0.5, 0.5, 1.0, 1.0):  # then replies that take longer and longer
        token = timing.begin()
        clock.now += seconds
        timing.end(token)
    # the last 4 replies: the 3 after the first, in 2.5 s; in the window's quarters (0.625 s each) replies of
    # 0.5, 1.0 and 1.0 s: their latency swings x2
    assert timing.pace(4, least_s=2.0) == Pace(3 / 2.5, 2.0)


def test_the_estimate_at_the_observed_pace_and_the_blend_of_the_two() -> None:
    made = {"umbrela": (36, 0), "support": (40, 0)}
    # 74 requests left and 4 in flight at 10 replies a second: 7.8 s of work; the chain of 3 requests at 0.5 s: 1.5 s
    assert paced(TREC, made, 0.5, 10.0, in_flight=4) == pytest.approx(math.sqrt(7.8 * 9.3))
    assert paced(Workload({"umbrela": 5}), {"umbrela": (5, 0)}, 0.5, 10.0) == 0.0
    # the model says 4 s: at the pace, 6 s: the geometric mean, within x1.5 of any time between them
    assert blend(4.0, 6.0) == pytest.approx(math.sqrt(24.0))
    assert blend(4.0, 9.0) == pytest.approx(6.0)  # 2.25 times apart: still within x1.5 of both
    assert blend(4.0, 9.1) is None and blend(9.1, 4.0) is None  # further apart: the pace is changing
    assert blend(0.0, 0.0) == 0.0


def test_the_display_blends_the_model_with_the_judges_pace_or_says_it_is_changing() -> None:
    clock = Clock()
    progress = Progress(clock=clock)
    progress.stages = ["trec"]
    progress.begin("trec")
    progress.outputs_total = 20
    judge = TimedJudge(clock)  # 8 at once
    progress.judge = judge
    display = ProgressDisplay(progress, io.StringIO(), tty=False, clock=clock)
    progress.planned(Workload({"umbrela": 1000}, stages=("trec",)))

    def waves(n: int, width: int, seconds: float) -> None:
        for _ in range(n):
            tokens = [judge.timing.begin() for _ in range(width)]
            clock.now += seconds
            for token in tokens:
                judge.timing.end(token)
        judge.accounting.task("umbrela").calls += n * width

    waves(64, 8, 0.5)  # 16 replies a second, as the model says
    # 488 left: the model 488 x 0.5 / 8 = 30.5 s; the pace (the 56 replies after the first of the last 64, in 3.5 s)
    # 488 / 16 = 30.5 s; both with a chain of one request, 0.5 s
    assert display.eta("trec", clock.now) == f"ETA {_duration(math.sqrt(30.5 * 31.0))}" == "ETA 31s"
    waves(3, 8, 1.5)  # then replies take 1.5 s: their latency swings x3 within the pace's window
    assert display.eta("trec", clock.now) == "ETA unknown (pace varies)"
    waves(30, 8, 0.25)  # then faster: 32 replies a second
    # 224 left: the model 224 x 0.25 / 8 = 7 s; the pace over the last 2 s (64 replies): 224 / 32 = 7 s
    assert display.eta("trec", clock.now) == f"ETA {_duration(math.sqrt(7 * 7.25))}" == "ETA 7.1s"
    waves(2, 8, 0.3)  # a little slower (x1.2): the model follows at once, the pace lags; the shown time is between
    # the latency of the last 48 replies: (16 x 0.3 + 32 x 0.25) / 48 s; 208 left: the model 208 x that / 8 s; the
    # pace: the 64 replies of the last 2 s, 208 / 32 = 6.5 s
    latency = (16 * 0.3 + 32 * 0.25) / 48
    model = math.sqrt(208 * latency / 8 * (208 * latency / 8 + latency))
    pace = math.sqrt(6.5 * (6.5 + latency))
    assert display.eta("trec", clock.now) == f"ETA {_duration(math.sqrt(model * pace))}" == "ETA 6.8s"
    waves(20, 1, 0.25)  # the run asks one request at a time: seven of the judge's eight slots are idle
    # the model still counts 8 a wave: 188 x 0.27 / 8 = 6.3 s; the pace (56 replies in 6.3 s): 21 s: too far apart
    assert display.eta("trec", clock.now) == "ETA unknown (pace changing)"


def test_a_busy_machine_is_an_unknown_eta_not_a_guess() -> None:
    lag = Lag(tick=0.1)
    assert lag.waiting(now=10.0) is None  # it has not woken yet
    for woke, late in ((7.5, 0.5), (8.2, 0.0), (8.6, 0.1), (9.0, 0.1), (9.5, 0.2)):
        lag.note(woke, late)
    # the last 2 s: four wakes, 0.4 s late in all, of 4 x 0.1 + 0.4 = 0.8 s: it waited half the time
    assert lag.waiting(2.0, now=10.0) == pytest.approx(0.5)
    assert lag.waiting(0.6, now=10.0) == pytest.approx(0.2 / 0.3)  # the last wake only
    clock = Clock()
    progress = Progress(clock=clock)
    progress.stages = ["trec"]
    progress.begin("trec")
    judge = TimedJudge(clock)
    progress.judge = judge
    progress.planned(Workload({"umbrela": 1000}, stages=("trec",)))
    for _ in range(8):
        tokens = [judge.timing.begin() for _ in range(8)]
        clock.now += 0.5
        for token in tokens:
            judge.timing.end(token)
    busy, idle = Lag(), Lag()
    busy.note(time.monotonic(), 0.3)  # 0.3 s late of 0.4 s: it waited 75% of the time
    idle.note(time.monotonic(), 0.01)
    busy_display = ProgressDisplay(progress, io.StringIO(), tty=False, clock=clock, lag=busy)
    assert busy_display.eta("trec", clock.now) == "ETA unknown (busy machine: 75% waiting for a CPU)"
    # a process that waited 2% of the time: the number (1000 left at 16 a second: 62.5 s, a chain of one 0.5 s)
    idle_display = ProgressDisplay(progress, io.StringIO(), tty=False, clock=clock, lag=idle)
    assert idle_display.eta("trec", clock.now) == f"ETA {_duration(math.sqrt(62.5 * 63))}" == "ETA 1m03s"
