"""Engine-free shards for array jobs (Kubernetes indexed jobs, Slurm arrays, CI matrices), in bounded memory.

``eval --shard i/n`` evaluates shard ``i`` of ``n`` (whole queries, ``shards.split_by_query``'s rule) window by
window and writes a shard folder (``shardfile``): ``shard.json`` (the config's text and digest, the input's digest,
the shard's position ranges, the judge's counters and health), ``records.jsonl`` (one record a query: its outputs and
every shard evaluator's scores and details, appended as each window finishes) and ``cache.sqlite`` (every judge
reply the shard used). A JSONL or CSV input with each query's lines together is read as a local run reads it: once
for its shape (the split needs only each query's number of outputs), then only the shard's queries, window by
window. Another input, or one whose queries are interleaved, is read whole and its shard evaluated in the same
windows (interleaved: as one window, as a local run does).

``merge DIR...`` checks the headers (one config, one input, each shard once, every output exactly once), merges the
shards' caches into the config's judge cache, then reads the records in order and gives the run its own windows
(``source.windows``' rule, across the shards' boundaries): HHEM scored per window (the run's own batches) and the
evaluators that need more than a query (consistency) run per window when they may be windowed, else over one
window of every output. The pipeline spills each window as it comes and writes the files a single run writes.
"""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
from array import array
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from itertools import islice
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, cast

from open_rag_eval.config import LoadedConfig
from open_rag_eval._version import __version__
from open_rag_eval.core.errors import ConfigError, InputError
from open_rag_eval.core.recording import HealthRecorder, recording
from open_rag_eval.core.types import EvalResult, RAGOutput
from open_rag_eval.executors.shardfile import (FORMAT, RECORDS_FILE, SHARD_FILE, Record, check_digest,
                                               check_positions, query_records, ranges, read_header, read_records,
                                               records_digest, write_records)
from open_rag_eval.executors.shards import (ShardResult, evaluate_rest_parts, merge_accounting, merge_health,
                                            check_shardable, merge_parts, needs_judge, query_shards, split_by_query,
                                            stages)
from open_rag_eval.judge.cache import CACHE_DB, CachedCompletion, JudgeCache, cache_path, read_entries
from open_rag_eval.run.generation import Generation
from open_rag_eval.inputs.validate import Tap, file_stamp
from open_rag_eval.run.manifest import file_digest
from open_rag_eval.run.evaluation import evaluate_all, or_empty, own_rows, windowed
from open_rag_eval.run.loop import Evaluated
from open_rag_eval.run.outputs import load_outputs
from open_rag_eval.run.session import judge_session
from open_rag_eval.run.source import contiguous, fewest_answered
from open_rag_eval.store.fileio import atomic_stream
from open_rag_eval.store.sqlite import connect

__all__ = ["FORMAT", "SHARD_FILE", "merge_shards", "parse_shard", "run_shard"]

SHARD_CACHE = "cache.sqlite"


def parse_shard(text: str) -> tuple[int, int]:
    """An argparse type: ``i/n`` with 0 <= i < n."""
    index, slash, count = text.partition("/")
    if not slash or not index.isascii() or not index.isdigit() or not count.isascii() or not count.isdigit() \
            or not 0 <= int(index) < int(count):
        raise argparse.ArgumentTypeError(f"must be i/n with 0 <= i < n (e.g. 0/4), got {text!r}")
    return int(index), int(count)


def shard_folder(loaded: LoadedConfig, output_dir: Path | None, index: int, count: int) -> Path:
    from open_rag_eval.run.checks import output_folder

    return output_dir or output_folder(loaded, None) / "shards" / f"{index}-of-{count}"


class _TeeCache:
    """The config's judge cache, every reply used also kept in the shard's own cache (merged later)."""

    def __init__(self, main: JudgeCache | None, shard: JudgeCache) -> None:
        self.main, self.shard = main, shard

    async def get(self, key: str) -> CachedCompletion | None:
        hit = await (self.main or self.shard).get(key)
        if hit is not None and self.main is not None:
            await self.shard.put(key, hit)
        return hit

    async def put(self, key: str, entry: CachedCompletion) -> None:
        if self.main is not None:
            await self.main.put(key, entry)
        await self.shard.put(key, entry)

    def close(self) -> None:
        for cache in (self.main, self.shard):
            if cache is not None:
                cache.close()


def window_size() -> int:
    """The run's window (``run.evaluation.WINDOW_OUTPUTS``, read when used: a test sets it small)."""
    from open_rag_eval.run import evaluation

    return evaluation.WINDOW_OUTPUTS


@dataclass
class ShardInput:
    """What a shard reads of the input: the whole input's shape and, lazily, its own windows (each window's
    positions in the input and outputs)."""

    n_outputs: int
    fewest_answered: int
    contiguous: bool
    positions: list[list[int]]  # the shard's, as ranges
    n_queries: int  # the shard's
    windows: Iterator[tuple[list[int], list[RAGOutput]]]
    input_sha256: str  # of the input's bytes as read


def window_ids(sizes: Iterable[int], size: int | None = None) -> Iterator[int]:
    """The run's window of each query (each query's number of outputs in order), cut as ``source.windows`` cuts
    (``size``: the run's window, ``run.evaluation.WINDOW_OUTPUTS``)."""
    size = window_size() if size is None else size
    window, filled = 0, 0
    for n in sizes:
        if filled and filled + n > size:
            window, filled = window + 1, 0
        filled += n
        yield window


def _cut(groups: Iterable[list[RAGOutput]], ids: Iterable[int], start: int
         ) -> Iterator[tuple[list[int], list[RAGOutput]]]:
    """The shard's queries (``groups``, from position ``start``) in windows: those of one run window together (a
    shard's window is the run's, or the part of it inside the shard)."""
    window: list[RAGOutput] = []
    current = None
    for group, window_id in zip(groups, ids):
        if window and window_id != current:
            yield list(range(start, start + len(window))), window
            start, window = start + len(window), []
        current = window_id
        window.extend(group)
    if window:
        yield list(range(start, start + len(window))), window


def _streamed_input(path: Path, index: int, count: int) -> ShardInput | None:
    """A JSONL or CSV input's shard from its shape (``run.source.FileSource``: each query's number of outputs, no
    output built), its queries read window by window; None for another input, or when its queries are
    interleaved."""
    from open_rag_eval.run.source import CsvSource, JsonlSource, check_unchanged

    kind = {".jsonl": JsonlSource, ".csv": CsvSource}.get(path.suffix.lower())
    if kind is None:
        return None
    query_sizes, query_groups = kind.readers()
    sizes: array[int] = array("q")
    seen: set[int] = set()
    fewest: int | None = None
    shape = Tap()
    for query_id, size, answered in query_sizes(path, shape):
        key = hash(query_id)
        if key in seen:  # (or a hash collision: then read whole, which is always right)
            return None
        seen.add(key)
        sizes.append(size)
        fewest = answered if fewest is None else min(fewest, answered)
    del seen
    mine = [q for q, shard in enumerate(query_shards(sizes, count)) if shard == index]
    first, stop = (mine[0], mine[-1] + 1) if mine else (0, 0)
    start = sum(sizes[:first])
    n = sum(sizes[first:stop])

    def groups() -> Iterator[list[RAGOutput]]:
        if first == stop:
            return
        for q, group in enumerate(query_groups(path, None)):
            check_unchanged(path, shape)
            if q >= stop:
                return
            if q >= first:
                if len(group) != sizes[q]:  # the file changed since its shape was read
                    raise InputError(f"the input changed while the shard read it (query {group[0].query_id!r}: "
                                     f"{len(group)} outputs, {sizes[q]} a moment before)", file=str(path))
                yield group

    ids = islice(window_ids(sizes), first, stop)
    return ShardInput(sum(sizes), fewest or 0, True, [[start, start + n]] if n else [], len(mine),
                      _cut(groups(), ids, start), shape.sha256)


def _whole_input(loaded: LoadedConfig, index: int, count: int) -> ShardInput:
    """Any other input, read at once: its shard in windows when its queries are contiguous, else one window."""
    assert loaded.config.input is not None  # run_shard splits an input file
    path = loaded.resolve_path(loaded.config.input)
    stamp, digest = file_stamp(path), file_digest(path)
    outputs = load_outputs(loaded)
    if file_stamp(path) != stamp or file_digest(path) != digest:
        raise InputError("the input changed while the shard read it: run the shard again", file=str(path))
    positions = split_by_query(outputs, count)[index]
    mine = [outputs[p] for p in positions]
    together = contiguous(outputs)
    queries: dict[str, list[RAGOutput]] = {}
    for output in mine:
        queries.setdefault(output.query_id, []).append(output)
    shape = ShardInput(len(outputs), fewest_answered(outputs), together, ranges(positions), len(queries),
                       iter([(positions, mine)] if mine else []), digest)
    if together and mine:
        sizes: dict[str, int] = {}
        for output in outputs:
            sizes[output.query_id] = sizes.get(output.query_id, 0) + 1
        ids = dict(zip(sizes, window_ids(sizes.values())))
        shape.windows = _cut(queries.values(), [ids[q] for q in queries], positions[0])
    return shape


async def run_shard(loaded: LoadedConfig, index: int, count: int, output_dir: Path | None = None) -> Path:
    """Evaluate shard ``index`` of ``count`` window by window and write its folder (at once when it is complete)."""
    check_shardable(loaded)
    if loaded.config.input is None and loaded.config.connector is not None:
        raise ConfigError("--shard splits the input file; a connector's outputs are fetched by one run "
                          "(use executor: ray, or fetch them first)", path="input")
    config_text = _config_text(loaded)
    input_path = loaded.resolve_path(loaded.config.input) if loaded.config.input is not None else None
    # no input: no output to split (a golden run file's rows are scored by the merge)
    shape = ShardInput(0, 0, True, [], 0, iter([]), "") if input_path is None else \
        _streamed_input(input_path, index, count) or _whole_input(loaded, index, count)
    folder = shard_folder(loaded, output_dir, index, count)
    with Generation(folder) as generation:
        with generation.writing(), atomic_stream(generation.path / RECORDS_FILE) as handle:
            if needs_judge(stages(loaded).shards) and shape.n_queries:
                path = cache_path(loaded.judge.cache, loaded.base_dir)
                shared = {} if path is None else {"cache": _TeeCache(JudgeCache(path), JudgeCache(
                    generation.path / SHARD_CACHE))}
                async with judge_session(loaded.judge, loaded.base_dir, str(loaded.path or ""), **shared) as judge:
                    n_records, health = await _evaluate(loaded, shape, judge, handle)
                    counters = getattr(judge, "accounting", None)
                    accounting = counters.snapshot() if counters is not None else None
                if shared:
                    shared["cache"].close()
            else:
                n_records, health = await _evaluate(loaded, shape, None, handle)
                accounting = None
        generation.write_json(SHARD_FILE, {
            "format": FORMAT, "tool_version": __version__, "index": index, "of": count,
            "config_digest": loaded.digest, "config_text": config_text, "base_dir": str(loaded.base_dir),
            "input": {"path": str(loaded.config.input), "sha256": shape.input_sha256} if input_path else
            {"path": None, "sha256": None},
            "n_outputs": shape.n_outputs, "contiguous": shape.contiguous, "fewest_answered": shape.fewest_answered,
            "positions": shape.positions, "n_queries": shape.n_queries, "n_records": n_records,
            "accounting": accounting, "health": health,
            "records_sha256": records_digest(generation.path),  # of the bytes written, the header written last
        })
        generation.commit()
    return folder


async def _evaluate(loaded: LoadedConfig, shape: ShardInput, judge: Any, handle: TextIO
                    ) -> tuple[int, dict[str, dict[str, Any]]]:
    """The shard evaluators on each window in turn (what they kept of a window forgotten after it, as a local run
    does), each window's records appended as it finishes; the number of records and the judge-health record."""
    evaluators = [spec.build() for spec in stages(loaded).shards]
    n = 0
    with recording() as recorder:
        for positions, window in shape.windows:
            parts = await evaluate_all(evaluators, window, judge, output_dir=None, base_dir=loaded.base_dir)
            n += write_records(handle, query_records(positions, window, parts, evaluators))
            for evaluator in evaluators:
                evaluator.forget()
    return n, {task: vars(counts) for task, counts in recorder.tasks.items()}


def _config_text(loaded: LoadedConfig) -> str:
    if loaded.path is None or not Path(loaded.path).is_file():
        raise ConfigError("--shard needs the config file (merge reads it from the shard folders)")
    return Path(loaded.path).read_text(encoding="utf-8-sig")


# -- merge ---------------------------------------------------------------------------------------------------


def check_shards(folders: Sequence[Path], shards: Sequence[dict[str, Any]]) -> None:
    """One config, one input, each shard once, every output in exactly one shard."""
    first, where = shards[0], folders[0]
    for folder, shard in zip(folders, shards):
        for key, what in (("config_digest", "config"), ("of", "number of shards"), ("n_outputs", "input")):
            if shard[key] != first[key]:
                raise InputError(f"comes from another {what} than {where}", file=str(folder), field=key)
        if shard["input"]["sha256"] != first["input"]["sha256"]:
            raise InputError(f"comes from another input file than {where}", file=str(folder), field="input")
    seen: dict[int, Path] = {}
    for folder, shard in zip(folders, shards):
        if shard["index"] in seen:
            raise InputError(f"shard {shard['index']}/{shard['of']} is given twice ({seen[shard['index']]} and "
                             f"{folder})", file=str(folder), field="index")
        seen[shard["index"]] = folder
    missing = sorted(set(range(first["of"])) - set(seen))
    if missing:
        count = first["of"]
        named = ", ".join(f"{i}/{count}" for i in missing)
        raise InputError(f"shard(s) {named} missing: a merge needs all {count}", file=str(where))
    check_positions(folders, shards, first["n_outputs"])
    for folder, shard in zip(folders, shards):  # before anything is merged or asked (again as the records are read)
        check_digest(folder, shard)


def merge_caches(folders: Sequence[Path], target: Path | None) -> int:
    """Copy every shard's cached replies into the config's judge cache (kept when already there); how many."""
    if target is None:
        return 0
    main, copied = JudgeCache(target), 0
    try:
        for folder in folders:
            path = folder / SHARD_CACHE
            if not path.is_file():
                continue
            source = connect(path, CACHE_DB, readonly=True)
            try:
                for key, entry in read_entries(source):
                    if main.get_sync(key) is None:
                        main.put_sync(key, entry)
                        copied += 1
            except sqlite3.Error as error:
                raise InputError(f"the shard's cache cannot be read: {error}", file=str(path)) from None
            finally:
                source.close()
    finally:
        main.close()
    return copied


class ShardedOutputs:
    """The outputs of shard folders, in input order, read from their records (``run.source.OutputSource``)."""

    def __init__(self, folders: Sequence[Path], shards: Sequence[dict[str, Any]]) -> None:
        order = sorted(range(len(shards)), key=lambda i: shards[i]["index"])
        self.folders, self.shards = [folders[i] for i in order], [shards[i] for i in order]
        first = self.shards[0]
        self.n_outputs, self.contiguous = int(first["n_outputs"]), bool(first["contiguous"])
        self.n_queries = sum(int(s["n_queries"]) for s in self.shards)
        self.fewest_answered = int(first["fewest_answered"])
        self.input_sha256: str | None = first["input"]["sha256"]  # what the shards read (check_shards: all alike)

    def records(self) -> Iterator[Record]:
        """Every record, shard by shard; each record's positions checked to follow the last one's (a contiguous
        input's shards hold consecutive positions, so the records are the input's order)."""
        at = 0
        for folder, shard in zip(self.folders, self.shards):
            for record in read_records(folder, shard):
                if self.contiguous and record.positions != list(range(at, at + len(record.positions))):
                    raise InputError("the shard's records do not hold the positions its header names: run this "
                                     "shard again", file=str(folder / RECORDS_FILE))
                at += len(record.positions)
                yield record
        if at != self.n_outputs:
            raise InputError("the shards do not hold every output exactly once", file=str(self.folders[0]),
                             field="positions")

    def record_windows(self, size: int) -> Iterator[list[Record]]:
        """The records in the run's windows of about ``size`` outputs (``source.windows``' rule); one window of
        every record when the input's queries are interleaved."""
        if not self.contiguous:
            everything = list(self.records())
            if sorted(p for r in everything for p in r.positions) != list(range(self.n_outputs)):
                raise InputError("the shards do not hold every output exactly once", file=str(self.folders[0]),
                                 field="positions")
            yield everything
            return
        window: list[Record] = []
        filled = 0
        for record in self.records():
            if window and filled + len(record.outputs) > size:
                yield window
                window, filled = [], 0
            window.append(record)
            filled += len(record.outputs)
        if window:
            yield window

    def windows(self, size: int | None = None) -> Iterator[list[RAGOutput]]:
        for records in self.record_windows(window_size() if size is None else size):
            yield _outputs(records)

    def all(self) -> list[RAGOutput]:
        return [o for window in self.windows(max(self.n_outputs, 1)) for o in window]


def _outputs(records: Sequence[Record]) -> list[RAGOutput]:
    """The outputs of ``records`` in input order."""
    pairs = sorted((p, i, j) for i, r in enumerate(records) for j, p in enumerate(r.positions))
    return [records[i].outputs[j] for _, i, j in pairs]


def _shard_result(records: Sequence[Record], n_parts: int) -> ShardResult:
    """The shard evaluators' results on ``records``, and their nugget lists, as one shard's."""
    parts = [EvalResult() for _ in range(n_parts)]
    lists: dict[int, dict[Any, dict[str, Any]]] = {}
    for record in records:
        for part, found in zip(parts, record.parts):
            part.extend(found)
        for e, key, data in record.nuggets:
            lists.setdefault(e, {})[key] = data
    return ShardResult(0, parts, nugget_lists=lists)


class MergedShards:
    """An executor whose shard evaluation is done: the shards' results window by window (``windows``), with what
    needs more than a shard (HHEM in the run's own batches, evaluators such as consistency)."""

    def __init__(self, source: ShardedOutputs) -> None:
        self.source = source
        self.snapshots: list[dict[str, Any] | None] = [s["accounting"] for s in source.shards]
        self.recorder = merge_health([s["health"] for s in source.shards])
        self.loaded: LoadedConfig | None = None  # the run's config, once ``windows`` starts

    async def windows(self, loaded: LoadedConfig, progress: Any
                      ) -> AsyncIterator[tuple[list[RAGOutput], list[EvalResult]]]:
        """Each window of the run: its outputs and every evaluator's result on them, in the run's order."""
        from open_rag_eval.executors.models import evaluate_models

        self.loaded, plan = loaded, stages(loaded)
        names = plan.orders
        everyone = [spec.build() for spec in loaded.evaluators]
        whole = not all(windowed(e, self.source.fewest_answered) for e in everyone)
        size = max(self.source.n_outputs, 1) if whole else window_size()
        async with contextlib.AsyncExitStack() as stack:
            judge = None
            if plan.driver and needs_judge(plan.driver):
                judge = await stack.enter_async_context(judge_session(loaded.judge, loaded.base_dir,
                                                                      str(loaded.path or "")))
            for records in or_empty(self.source.record_windows(size), own_rows(everyone)):
                outputs = _outputs(records)
                shard = _shard_result(records, len(names))
                del records
                models = {i: await evaluate_models(spec, outputs) for i, spec in plan.models.items()}
                parts = merge_parts(names, outputs, [shard], models)
                if plan.driver:
                    previous = EvalResult()
                    for part in parts:
                        previous.extend(part)
                    rest, recorded = await evaluate_rest_parts(loaded, [shard], outputs, judge, previous, progress)
                    parts += rest
                    self.recorder.merge([recorded])
                yield outputs, parts
            if judge is not None:
                self.snapshots.append(cast(Any, judge).accounting.snapshot())  # the merge's own judge calls

    def ended(self) -> Evaluated:
        """The judge as the manifest sees it (the shards' counters and the merge's, summed) and the health record."""
        loaded = self.loaded
        assert loaded is not None, "ended() comes after windows()"
        judge_view = None
        if needs_judge(loaded.evaluators):
            import types

            from open_rag_eval.judge.accounting import price_for

            config = loaded.judge
            accounting = merge_accounting(self.snapshots, config.model, price_for(config.model, config.prices))
            judge_view = types.SimpleNamespace(model=config.model, simulated=config.simulated is not None,
                                               accounting=accounting)
        return Evaluated(EvalResult(), judge_view, self.recorder)


async def merge_shards(folders: Sequence[Path], output_dir: Path | None = None, progress: Any = None) -> Any:
    """Check, merge and write the shards in ``folders``: the report of the single run they make up."""
    from open_rag_eval.config import load_config_text
    from open_rag_eval.report import write_report
    from open_rag_eval.run.pipeline import arun

    folders = [Path(f) for f in folders]
    shards = [read_header(folder) for folder in folders]
    check_shards(folders, shards)
    first = shards[0]
    base_dir = Path(first["base_dir"])
    loaded = load_config_text(first["config_text"], base_dir=base_dir, file=str(folders[0] / SHARD_FILE),
                              outputs_given=True)
    if loaded.digest != first["config_digest"]:
        raise InputError("the config text does not match its recorded digest", file=str(folders[0] / SHARD_FILE))
    merge_caches(folders, cache_path(loaded.judge.cache, base_dir))
    source = ShardedOutputs(folders, shards)
    return await arun(loaded, output_dir=output_dir, source=source, progress=progress,
                      executor=MergedShards(source), write_report=write_report)
