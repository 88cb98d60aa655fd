"""The ``ray`` executor: a run's outputs evaluated in Ray worker actors, written by the one writer.

The driver (the ``eval`` process) splits the outputs into shards of whole queries (``shards.split_by_query``),
starts one ``Budget`` actor per judge endpoint, one ``CacheOwner`` on its own machine and ``workers`` worker
actors, and hands each worker the next shard as it finishes one. Alongside, the model stage (``models``) scores
HHEM and BERTScore in Ray Data pools of model actors. The shards' and the model stage's results are merged into one
run's (``shards.merge_results``); evaluators that need the whole run (consistency, its BERTScore taken from the model
stage) then run in the driver, with the same budget and cache; ``pipeline.arun`` writes the files. A worker that
dies is restarted by Ray and its shard run again (``max_restarts``); every judgment it had finished comes from the
cache. With ``relays: N``, N ``Relay`` actors
beside the cache owner make every judge call (``relay``), so a call in flight when its worker died is not paid again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import types
import uuid
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from open_rag_eval.config import LoadedConfig
from open_rag_eval.config.executor import ExecutorOptions
from open_rag_eval.core.errors import ConfigError, MissingDependency, OpenRagEvalError, RunIncomplete
from open_rag_eval.executors.relay import Relay, RelayClient, attach
from open_rag_eval.executors.relay import RemoteCache
from open_rag_eval.executors.remote import Budget, CacheOwner, SharedLimiter, ShardWorker
from open_rag_eval.executors.shards import (ShardResult, Stages, evaluate_rest, merge_accounting, merge_health,
                                            merge_results, needs_judge, split_by_query, stages)
from open_rag_eval.judge.accounting import price_for
from open_rag_eval.judge.cache import cache_path
from open_rag_eval.run.loop import Evaluated
from open_rag_eval.run.session import judge_session
from open_rag_eval.core.progress import Progress
from open_rag_eval.core.types import EvalResult, RAGOutput

__all__ = ["RayExecutor", "connect", "import_ray"]

log = logging.getLogger("open_rag_eval.executors")
MODEL_CPUS = 0.5  # what a model actor reserves without a GPU


def import_ray() -> Any:
    """Ray itself (the ``ray`` extra), imported when a Ray run starts."""
    try:
        import ray
    except ImportError:
        raise MissingDependency("ray", "ray") from None
    return ray


def connect(address: str | None, timeout_s: float = 30.0) -> Any:
    """Ray, initialised: an instance already started in this process, else ``address`` (None: a new local one,
    even while a Ray cluster runs on this machine; ``auto`` joins that one). A ``host:port`` or ``ray://host:port``
    address is first reached with a plain TCP connection bounded by ``timeout_s``: an unreachable cluster is one
    clear error at once, not Ray's own retries for many minutes."""
    ray = import_ray()
    if not ray.is_initialized():
        reachable(address, timeout_s)
        ray.init(address=address or "local", include_dashboard=False, configure_logging=False, log_to_driver=False)
    return ray


def reachable(address: str | None, timeout_s: float) -> None:
    """Raise ``OpenRagEvalError`` when ``address`` names a host and port that does not accept a TCP connection
    within ``timeout_s`` (``local``, ``auto`` and no address are not checked)."""
    import socket
    from urllib.parse import urlsplit

    if not address or address in ("local", "auto"):
        return
    split = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        host, port = split.hostname, split.port or 6379
    except ValueError:
        host, port = None, None
    if not host or port is None:
        raise ConfigError(f"not a Ray address: {address!r} (host:port, ray://host:port or auto)",
                          path="executor.address")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as error:
        raise OpenRagEvalError(f"the Ray cluster at {host}:{port} cannot be reached within {timeout_s:g} s "
                               f"(executor.connect_timeout_s): {error.strerror or error}") from None


class RayExecutor:
    def __init__(self, options: ExecutorOptions) -> None:
        self.options = options
        self.actors: list[Any] = []  # the run's actors, killed when it ends
        self.workers: list[Any] = []
        self.budgets: list[Any] = []
        self.cache_owner: Any = None
        self.relays: list[Any] = []

    async def evaluate(self, loaded: LoadedConfig, outputs: list[RAGOutput], progress: Progress) -> Evaluated:
        ray = connect(self.options.address, self.options.connect_timeout_s)
        plan = stages(loaded)
        try:
            self._start(ray, loaded, outputs)
            models = asyncio.ensure_future(asyncio.to_thread(self._models, ray, outputs, plan))
            try:
                results = await self._shards(ray, loaded, outputs, progress)
            finally:
                self._release_workers(ray)  # the model stage may be waiting for their CPUs
                model_results, bertscored = await models
            result = merge_results(plan.orders, outputs, results, model_results)
            snapshots = [r.accounting for r in results]
            health = [r.health for r in results]
            if plan.driver:
                rest, judge, recorded = await self._driver(loaded, outputs, results, result, progress, bertscored)
                result.extend(rest)
                if judge is not None:
                    snapshots.append(judge.accounting.snapshot())
                health.append(recorded)
            snapshots.extend(await self._paid())
        finally:
            self._close_cache(ray)
            for actor in self.actors:
                ray.kill(actor)
            self.actors, self.workers, self.budgets, self.cache_owner, self.relays = [], [], [], None, []
        judge_view = None
        if needs_judge(loaded.evaluators):
            config = loaded.judge
            accounting = merge_accounting(snapshots, config.model, price_for(config.model, config.prices))
            judge_view = types.SimpleNamespace(model=config.model, simulated=config.simulated is not None,
                                               accounting=accounting)
        return Evaluated(result, judge_view, merge_health(health))

    # -- the run's actors --------------------------------------------------------------------------------

    def _start(self, ray: Any, loaded: LoadedConfig, outputs: list[RAGOutput]) -> None:
        options, config = self.options, loaded.judge
        run = uuid.uuid4().hex[:12]
        cpus_total = ray.cluster_resources().get("CPU", 1)
        workers = options.workers or max(1, int(cpus_total))
        self.n_shards = max(workers, math.ceil(len(outputs) / options.shard_outputs))
        endpoints = config.endpoints() or [(config.base_url or "", config.max_concurrency)]
        names = [f"open-rag-eval-budget-{run}-{i}" for i in range(len(endpoints))]
        for name, (_, limit) in zip(names, endpoints):
            budget = self._actor(ray, Budget, name, num_cpus=0)
            self.budgets.append(budget.remote(limit, config.requests_per_minute, config.tokens_per_minute,
                                              config.adaptive_concurrency))
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        path, cache_name = cache_path(config.cache, loaded.base_dir), None
        if path is not None:
            cache_name = f"open-rag-eval-cache-{run}"
            owner = self._actor(ray, CacheOwner, cache_name, num_cpus=0, scheduling_strategy=here)
            self.cache_owner = owner.remote(str(path))
            _unwrap_sync(ray, self.cache_owner.count.remote())  # a cache that cannot be opened fails here
        relays = [f"open-rag-eval-relay-{run}-{i}" for i in range(options.relays if relayed(loaded) else 0)]
        for name in relays:  # beside the cache owner: a relay dies only with the driver's machine
            relay = self._actor(ray, Relay, name, num_cpus=0, scheduling_strategy=here, max_concurrency=10_000,
                                max_restarts=options.max_restarts)
            self.relays.append(relay.remote(config, str(loaded.base_dir), cache_name))
        workers = min(workers, len(outputs)) or 1
        # the model stage's actors run beside the workers: leave them their CPUs
        plan = stages(loaded)
        models = 0.0 if not (plan.models or plan.bertscore) or ray.cluster_resources().get("GPU", 0) \
            else MODEL_CPUS * options.model_actors
        cpus = options.worker_cpus or min(1.0, max(0.01, (cpus_total - models) / workers))
        restarts = options.max_restarts
        for w in range(workers):
            worker = self._actor(ray, ShardWorker, f"open-rag-eval-worker-{run}-{w}", num_cpus=cpus,
                                 max_restarts=restarts, max_task_retries=restarts)
            self.workers.append(worker.remote(f"worker-{w}", names, cache_name, relays))
        log.info("ray: %d outputs, %d workers (%g CPU each), %d judge endpoint(s), %d relay(s)", len(outputs),
                 workers, cpus, len(endpoints), len(relays))

    async def _paid(self) -> list[dict[str, Any]]:
        """What the relays paid: the calls, retries, tokens and abandoned prompts of every judge call they made
        (counted where the calls were made: a worker that died took none of it with it)."""
        paid = await asyncio.gather(*(_unwrap(relay.paid.remote()) for relay in self.relays))
        for index, (_, restarted) in enumerate(paid):
            if restarted:
                log.warning("ray: judge relay %d was restarted during the run: the calls it had made before are "
                            "missing from the manifest's accounting (they are in the judge cache)", index)
        return [snapshot for snapshot, _ in paid]

    def _close_cache(self, ray: Any) -> None:
        """The cache owner closes the run's SQLite cache before it is stopped: every reply it took is in the file
        (checkpointed), not left in a write-ahead log of a killed process."""
        if self.cache_owner is None:
            return
        try:
            ray.get(self.cache_owner.close.remote(), timeout=60)
        except Exception as error:  # noqa: BLE001 - the owner died: SQLite recovers its log at the next open
            log.warning("ray: the judge cache owner could not close the cache: %s", error)

    def _release_workers(self, ray: Any) -> None:
        """The shard workers, done with every shard, stopped: the CPUs they held go to the model stage's actors
        (which wait for them when the workers took every CPU, e.g. with ``worker_cpus: 1``)."""
        for worker in self.workers:
            ray.kill(worker)
        self.actors = [actor for actor in self.actors if all(actor is not worker for worker in self.workers)]
        self.workers = []

    def _actor(self, ray: Any, cls: type, name: str, **options: Any) -> Any:
        return _Tracked(ray.remote(cls).options(name=name, **options), self.actors)

    # -- the stages --------------------------------------------------------------------------------------

    async def _shards(self, ray: Any, loaded: LoadedConfig, outputs: list[RAGOutput], progress: Progress
                      ) -> list[ShardResult]:
        shards = deque((i, s) for i, s in enumerate(split_by_query(outputs, self.n_shards)) if s)
        results: list[ShardResult] = []
        stage = replace(loaded, evaluators=stages(loaded).shards)
        name = stage.evaluators[0].cls.name if stage.evaluators else "evaluate"
        stage_ref = ray.put(stage)

        lost: list[tuple[int, list[RAGOutput], str]] = []

        async def drive(worker: Any) -> None:
            while shards:
                index, positions = shards.popleft()
                mine = [outputs[p] for p in positions]
                try:
                    results.append(await _unwrap(worker.run.remote(stage_ref, mine, index)))
                except _WorkerLost as error:  # the other workers go on: all they judge is cached for the re-run
                    lost.append((index, mine, str(error)))
                    return
                progress.report(name, "outputs", len(mine))

        await asyncio.gather(*(drive(worker) for worker in self.workers))
        if lost:
            raise self._incomplete(loaded, lost, [[outputs[p] for p in positions] for _, positions in shards])
        return results

    def _incomplete(self, loaded: LoadedConfig, lost: list[tuple[int, list[RAGOutput], str]],
                    never: list[list[RAGOutput]]) -> RunIncomplete:
        """Exit 6: which shards were lost (and not run), why, and the command that resumes."""
        lost.sort(key=lambda item: item[0])
        named = "; ".join(f"shard {index + 1} of {self.n_shards} ({_queries(mine)})" for index, mine, _ in lost)
        reason = lost[0][2].splitlines()[0][:300] if lost[0][2] else "no detail"
        rest = f"; {len(never)} more shard(s) were never run (no worker left)" if never else ""
        cache = cache_path(loaded.judge.cache, loaded.base_dir)
        kept = f"in the judge cache {cache}" if cache is not None else "nowhere (judge.cache is off)"
        return RunIncomplete(
            f"incomplete run: {named} lost: its Ray worker died and could not be restarted "
            f"(executor.max_restarts: {self.options.max_restarts}; {reason}){rest}. No results were written; "
            f"every judgment made is {kept}. Re-run the same command (open-rag-eval eval --config "
            f"{loaded.path or 'CONFIG'} --executor ray) to resume: finished judgments are not paid again")

    def _models(self, ray: Any, outputs: list[RAGOutput], plan: Stages) -> tuple[dict[int, EvalResult], dict[int, Any]]:
        """The model stage: HHEM (trec evaluator index -> its result) and BERTScore (consistency evaluator index ->
        its ``bertscored``), one pool after the other, alongside the shards."""
        if not (plan.models or plan.bertscore):
            return {}, {}
        from open_rag_eval.executors.models import bertscore_stage, model_stage

        gpus = self.options.model_gpus
        if gpus is None:
            gpus = 1.0 if ray.cluster_resources().get("GPU", 0) else 0.0
        actors = self.options.model_actors
        hhem = {i: model_stage(ray, spec, outputs, actors=actors, num_gpus=gpus, num_cpus=MODEL_CPUS)
                for i, spec in plan.models.items()}
        bertscore = {i: bertscore_stage(ray, spec, outputs, actors=actors, num_gpus=gpus, num_cpus=MODEL_CPUS)
                     for i, spec in plan.bertscore.items()}
        return hhem, {i: scored for i, scored in bertscore.items() if scored is not None}

    async def _driver(self, loaded: LoadedConfig, outputs: list[RAGOutput], results: list[ShardResult],
                      previous: EvalResult, progress: Progress,
                      bertscored: dict[int, Any]) -> tuple[EvalResult, Any, dict[str, Any]]:
        """The evaluators that see the whole run, here, with the run's shared budget and cache."""
        async with self._judge(loaded, needs_judge(stages(loaded).driver)) as judge:
            rest, recorded = await evaluate_rest(loaded, results, outputs, judge, previous, progress, bertscored)
        return rest, judge, recorded

    @contextlib.asynccontextmanager
    async def _judge(self, loaded: LoadedConfig, needed: bool) -> AsyncIterator[Any]:
        if not needed:
            yield None
            return
        limiters = [SharedLimiter(budget, f"driver:{os.getpid()}", requests_per_minute=loaded.judge.requests_per_minute,
                                  tokens_per_minute=loaded.judge.tokens_per_minute) for budget in self.budgets]
        shared: dict[str, Any] = {"limiters": limiters}
        if self.cache_owner is not None:
            shared["cache"] = RemoteCache(self.cache_owner)
        try:
            async with judge_session(loaded.judge, loaded.base_dir, str(loaded.path or ""), **shared) as judge:
                attach(judge, RelayClient(self.relays, f"driver:{os.getpid()}") if self.relays else None)
                yield judge
        finally:
            for limiter in limiters:
                await limiter.aclose()


def relayed(loaded: LoadedConfig) -> bool:
    """Whether a run's judge calls can be relayed: a judge that calls an endpoint (a simulated judge charges
    nothing; a recording or replaying one has its own path)."""
    config = loaded.judge
    return needs_judge(loaded.evaluators) and config.simulated is None and config.record is None \
        and config.replay is None


class _Tracked:
    """``ray.remote(cls).options(...)`` whose ``remote()`` remembers the actor, to be killed when the run ends."""

    def __init__(self, remote: Any, actors: list[Any]) -> None:
        self._remote, self._actors = remote, actors

    def remote(self, *args: Any) -> Any:
        actor = self._remote.remote(*args)
        self._actors.append(actor)
        return actor


class _WorkerLost(OpenRagEvalError):
    """A worker actor died past its restarts (its shard is lost)."""


def _queries(outputs: list[RAGOutput]) -> str:
    queries = list(dict.fromkeys(o.query_id for o in outputs))
    named = ", ".join(queries[:3]) + (f" and {len(queries) - 3} more" if len(queries) > 3 else "")
    return f"{len(outputs)} outputs of queries {named}"


def _error(error: BaseException) -> BaseException:
    """An error raised inside an actor as itself (a judge outage stays ``JudgeUnavailable``, a cache problem a
    ``StorageError`` naming the file); a worker that died for good, named."""
    import ray

    if isinstance(error, ray.exceptions.RayTaskError):
        cause = getattr(error, "cause", None)
        return cause if isinstance(cause, BaseException) else error
    if isinstance(error, ray.exceptions.RayActorError):
        return _WorkerLost(str(error))
    return error


async def _unwrap(ref: Any) -> Any:
    try:
        return await ref
    except Exception as error:
        raise _error(error) from None


def _unwrap_sync(ray: Any, ref: Any) -> Any:
    try:
        return ray.get(ref)
    except Exception as error:
        raise _error(error) from None
