"""Shards of one evaluation: split the outputs by query, evaluate a shard, merge shard results into one run's.

A shard holds whole queries (every run of a query, so its nugget list is built once), contiguous in the order the
queries first appear. Evaluating a shard runs the run's evaluators, in order, on its outputs with the normal async
core; merging puts every evaluator's scores and details back into the order one run over all outputs gives, so the
written files are byte-identical to a local run's.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.core.recording import HealthRecorder, recording
from open_rag_eval.evaluators.base import Contract, kept_of
from open_rag_eval.judge.accounting import Accounting
from open_rag_eval.judge.base import Judge
from open_rag_eval.core.types import Detail, EvalResult, RAGOutput, Score

if TYPE_CHECKING:
    from open_rag_eval.metrics.similarity import BertScores

__all__ = ["ShardResult", "Stages", "check_shardable", "evaluate_rest", "evaluate_rest_parts",
           "evaluate_shard", "merge_accounting", "merge_health", "merge_parts", "merge_results", "needs_judge",
           "query_shards", "sharded", "split_by_query", "stages"]

# Which evaluators work output by output, and the order of their results in one run (query by query: all runs of
# a query together, queries in first-seen order; or in the order of the outputs), each evaluator declares
# (``Contract.order``). Others see the whole run at once (consistency compares a query's runs and spreads the scores
# of the evaluators before it): they run after the shards, in the driver, with their BERTScore scored beforehand in
# the model stage (its batches are fixed by the outputs: ``consistency.bertscore_chunks``). A shard evaluator's
# model metrics (``Contract.model_metrics``: trec's HHEM) are computed in the model stage, in the run's own batches.


@dataclass(frozen=True)
class Stages:
    """A run's evaluators split by where they run: ``shards`` (in order, model metrics left out) evaluate shard by
    shard; ``models`` (index into the run's evaluators -> a spec computing only its model metrics) run in the model
    stage over the run's own chunks; ``driver`` (the rest, in order) run once over every output."""

    shards: list[Any]
    models: dict[int, Any]
    driver: list[Any]
    bertscore: dict[int, Any] = field(default_factory=dict)  # run's evaluator index -> a consistency spec scoring it
    orders: list[str] = field(default_factory=list)  # each shard evaluator's order of results (``Contract.order``)


def stages(loaded: LoadedConfig) -> Stages:
    specs = list(loaded.evaluators)
    contracts = [spec.build().contract() for spec in specs]
    cut = next((i for i, contract in enumerate(contracts) if not _sharded(contract)), len(specs))
    shards, models = [], {}
    for i, spec in enumerate(specs[:cut]):
        split = contracts[i].model_split
        if contracts[i].model_metrics and split is not None:
            held, rest = split()
            models[i], spec = replace(spec, options=held), replace(spec, options=rest)
        shards.append(spec)
    bertscore = {i: spec for i, spec in enumerate(specs) if i >= cut and "bertscore" in contracts[i].model_metrics}
    return Stages(shards, models, specs[cut:], bertscore, [str(c.order) for c in contracts[:cut]])


def sharded(spec: Any) -> bool:
    """Whether an evaluator runs shard by shard: not one with rows of its own (golden's TREC ``run`` file, scored
    once by the driver or the merge: it needs no judge, and its rows are the run file's queries, not a shard's)."""
    return _sharded(spec.build().contract())


def _sharded(contract: Contract) -> bool:
    """Output by output (``Contract.order``) and without rows of its own."""
    return contract.order is not None and not contract.own_rows


def split_by_query(outputs: Sequence[RAGOutput], n: int) -> list[list[int]]:
    """``n`` shards of output indices: whole queries, contiguous in first-seen order, about equal in outputs.
    A shard may be empty when there are fewer queries than shards."""
    by_query: dict[str, list[int]] = {}
    for index, output in enumerate(outputs):
        by_query.setdefault(output.query_id, []).append(index)
    shards: list[list[int]] = [[] for _ in range(n)]
    groups = list(by_query.values())
    for indices, shard in zip(groups, query_shards([len(g) for g in groups], n)):
        shards[shard].extend(indices)
    return [sorted(shard) for shard in shards]


def query_shards(sizes: Sequence[int], n: int) -> Iterator[int]:
    """The shard of each query, given each query's number of outputs in first-seen order: whole queries,
    contiguous, about equal in outputs (``split_by_query``'s rule; ``eval --shard`` applies it to a JSONL input's
    shape without reading its outputs)."""
    done, total = 0, sum(sizes)
    for size in sizes:
        yield min(n - 1, done * n // total) if total else 0
        done += size


def needs_judge(specs: Sequence[Any]) -> bool:
    """Whether any of these evaluators asks the judge (their contracts say; consistency does only with
    judge_repeats)."""
    from open_rag_eval.evaluators.base import needs_judge as any_needs  # noqa: PLC0415

    return any_needs(spec.build() for spec in specs)


def check_shardable(loaded: LoadedConfig) -> None:
    """An evaluator that reads an earlier results folder cannot be split by query, and a taped judge records one
    process's calls. (A TREC run file's rows are scored once, after the shards: ``sharded``.)"""
    judge = loaded.judge
    if judge.record is not None or judge.replay is not None:
        raise ConfigError("judge.record / judge.replay tape one process's calls: use executor: local",
                          path="judge.replay" if judge.replay is not None else "judge.record")
    for i, spec in enumerate(loaded.evaluators):
        if "results" in spec.build().contract().reads:  # a results folder of its own (consistency.results_dir)
            raise ConfigError(f"the {spec.type} evaluator reads its own data (results_dir), which cannot be "
                              "split into shards: use executor: local for this config", path=f"evaluators[{i}]")


@dataclass
class ShardResult:
    """What evaluating one shard gives: per evaluator its result, and the judge's counters."""

    index: int
    parts: list[EvalResult]
    accounting: dict[str, Any] | None = None  # Accounting.snapshot() of the shard's judge
    health: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> TaskCounts fields
    # evaluator index -> query id -> its nugget list, for evaluators after the shards (judge test-retest reuses them)
    nugget_lists: dict[int, dict[str, dict[str, Any]]] = field(default_factory=dict)


async def evaluate_shard(loaded: LoadedConfig, outputs: Sequence[RAGOutput], judge: Judge | None, index: int = 0,
                         output_dir: Path | None = None) -> ShardResult:
    """Run every evaluator of ``loaded`` on ``outputs`` (one shard) with ``judge``, as a local run does."""
    from open_rag_eval.run.evaluation import evaluate_all

    evaluators = [spec.build() for spec in stages(loaded).shards]
    with recording() as recorder:
        parts = await evaluate_all(evaluators, list(outputs), judge, output_dir=output_dir, base_dir=loaded.base_dir)
    accounting = getattr(judge, "accounting", None)
    lists = {i: dict(kept) for i, kept in enumerate(kept_of(e) for e in evaluators) if kept}
    return ShardResult(index, parts, accounting.snapshot() if accounting is not None else None,
                       {task: vars(counts) for task, counts in recorder.tasks.items()}, lists)


async def evaluate_rest(loaded: LoadedConfig, results: Sequence[ShardResult], outputs: list[RAGOutput],
                        judge: Judge | None, previous: EvalResult, progress: Any = None,
                        bertscored: dict[int, BertScores | str] | None = None
                        ) -> tuple[EvalResult, dict[str, dict[str, Any]]]:
    """The evaluators after the shard stage, once over every output, seeing the shards' evaluators as a single run
    does (their nugget lists restored), with the BERTScore the model stage scored (``bertscored``: evaluator index
    -> what its ``Contract.model_scores`` takes); their result and judge-health record."""
    parts, recorded = await evaluate_rest_parts(loaded, results, outputs, judge, previous, progress, bertscored)
    result = EvalResult()
    for part in parts:
        result.extend(part)
    return result, recorded


async def evaluate_rest_parts(loaded: LoadedConfig, results: Sequence[ShardResult], outputs: list[RAGOutput],
                              judge: Judge | None, previous: EvalResult, progress: Any = None,
                              bertscored: dict[int, BertScores | str] | None = None
                              ) -> tuple[list[EvalResult], dict[str, dict[str, Any]]]:
    """``evaluate_rest`` evaluator by evaluator (``outputs`` may be one window of the run's whole queries)."""
    from open_rag_eval.run.evaluation import evaluate_all

    evaluators = [spec.build() for spec in loaded.evaluators]
    for shard in results:
        for i, lists in shard.nugget_lists.items():
            kept = evaluators[int(i)].contract().kept
            assert kept is not None  # a shard hands back only what its evaluator declared it keeps
            for key, data in lists.items():
                kept.restore(key, data)
    for i, scored in (bertscored or {}).items():
        take = evaluators[i].contract().model_scores
        if take is not None:
            take(scored)
    first = len(stages(loaded).shards)
    with recording() as recorder:
        parts = await evaluate_all(evaluators[first:], outputs, judge, output_dir=None, base_dir=loaded.base_dir,
                                   progress=progress, previous=previous, everyone=evaluators)
    return parts, {task: vars(counts) for task, counts in recorder.tasks.items()}


def _ranks(outputs: Sequence[RAGOutput], by_query: bool) -> dict[tuple[str, int | None], tuple[int, int]]:
    """(query_id, run) -> its place in one run's results: by input position, or query by query (a query's
    cross-run row right after its last run)."""
    queries: dict[str, int] = {}
    for output in outputs:
        queries.setdefault(output.query_id, len(queries))
    order = sorted(range(len(outputs)), key=lambda i: (queries[outputs[i].query_id], i)) if by_query \
        else range(len(outputs))
    ranks: dict[tuple[str, int | None], tuple[int, int]] = {}
    last: dict[str, int] = {}
    for place, i in enumerate(order):
        ranks.setdefault(outputs[i].key, (place, 0))
        last[outputs[i].query_id] = place
    for query_id, place in last.items():
        ranks[(query_id, None)] = (place, 1)
    return ranks


def merge_results(orders: Sequence[str], outputs: Sequence[RAGOutput], shards: Sequence[ShardResult],
                  models: dict[int, EvalResult] | None = None) -> EvalResult:
    """One run's result from the shards' (and the model stage's, after the shards'): evaluator by evaluator, each
    evaluator's scores and details in the order a single run over ``outputs`` gives them (a stable sort, so an
    output's own order is kept)."""
    result = EvalResult()
    for part in merge_parts(orders, outputs, shards, models):
        result.extend(part)
    return result


def merge_parts(orders: Sequence[str], outputs: Sequence[RAGOutput], shards: Sequence[ShardResult],
                models: dict[int, EvalResult] | None = None) -> list[EvalResult]:
    """``merge_results`` evaluator by evaluator: one result each, as a run's window gives them."""
    ordered = sorted(shards, key=lambda shard: shard.index)
    merged: list[EvalResult] = []
    for e, order in enumerate(orders):
        ranks = _ranks(outputs, order == "query")
        far = (len(outputs) + 1, 2)

        def rank(item: Score | Detail) -> tuple[int, int]:
            return ranks.get((item.query_id, item.run), far)

        parts = [shard.parts[e] for shard in ordered] + ([models[e]] if models and e in models else [])
        scores = [s for part in parts for s in part.scores]
        details = [d for part in parts for d in part.details]
        merged.append(EvalResult(scores=sorted(scores, key=rank), details=sorted(details, key=rank)))
    return merged


def merge_accounting(snapshots: Sequence[dict[str, Any] | None], model: str, price: Any) -> Accounting | None:
    """The judge's counters summed over the shards (None when no shard used a judge)."""
    found = [s for s in snapshots if s is not None]
    if not found:
        return None
    total = Accounting(model, price)
    for snapshot in found:
        total.absorb(snapshot)
    return total


def merge_health(parts: Sequence[dict[str, dict[str, Any]]]) -> HealthRecorder:
    return HealthRecorder().merge(parts)
