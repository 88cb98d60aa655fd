"""Engine-free shards for array jobs (Kubernetes indexed jobs, Slurm arrays, CI matrices).

``eval --shard i/n`` evaluates shard ``i`` of ``n`` (whole queries, ``shards.split_by_query``) and writes a shard
folder: ``shard.json`` (the config's text and digest, the input's digest, the shard's outputs and every evaluator's
result, the judge's counters) and ``cache.sqlite`` (every judge reply the shard used). ``merge DIR...`` checks that
the folders come from one config and one input and hold each shard exactly once, merges their caches into the
config's judge cache, adds what needs the whole run (HHEM in the run's own batches, evaluators such as consistency)
and writes the files a single run writes, through the same writer.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from open_rag_eval._version import __version__
from open_rag_eval.core.errors import ConfigError, InputError
from open_rag_eval.executors.shards import (ShardResult, check_shardable, evaluate_rest, evaluate_shard,
                                            merge_accounting, merge_health, merge_results, needs_judge, split_by_query,
                                            stages)
from open_rag_eval.judge.cache import CACHE_DB, CachedCompletion, JudgeCache, cache_path, read_entries
from open_rag_eval.run.pipeline import Evaluated, judge_session, load_outputs
from open_rag_eval.run.generation import Generation
from open_rag_eval.run.manifest import file_digest
from open_rag_eval.store.sqlite import connect
from open_rag_eval.core.types import EvalResult, RAGOutput

__all__ = ["SHARD_FILE", "merge_shards", "parse_shard", "run_shard"]

SHARD_FILE = "shard.json"
SHARD_CACHE = "cache.sqlite"
FORMAT = 1


def parse_shard(text: str) -> tuple[int, int]:
    """An argparse type: ``i/n`` with 0 <= i < n."""
    index, slash, count = text.partition("/")
    if not slash or not index.isascii() or not index.isdigit() or not count.isascii() or not count.isdigit() \
            or not 0 <= int(index) < int(count):
        raise argparse.ArgumentTypeError(f"must be i/n with 0 <= i < n (e.g. 0/4), got {text!r}")
    return int(index), int(count)


def shard_folder(loaded: Any, output_dir: Path | None, index: int, count: int) -> Path:
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


async def run_shard(loaded: Any, index: int, count: int, output_dir: Path | None = None) -> Path:
    """Evaluate shard ``index`` of ``count`` and write its folder (all at once, like a run's results)."""
    check_shardable(loaded)
    if loaded.config.input is None:
        raise ConfigError("--shard splits the input file; a connector's outputs are fetched by one run "
                          "(use executor: ray, or fetch them first)", path="input")
    outputs = load_outputs(loaded)
    positions = split_by_query(outputs, count)[index]
    mine = [outputs[p] for p in positions]
    folder = shard_folder(loaded, output_dir, index, count)
    with Generation(folder) as generation:
        if needs_judge(stages(loaded).shards) and mine:
            path = cache_path(loaded.judge.cache, loaded.base_dir)
            shared = {} if path is None else {"cache": _TeeCache(JudgeCache(path), JudgeCache(
                generation.path / SHARD_CACHE))}
            async with judge_session(loaded.judge, loaded.base_dir, str(loaded.path or ""), **shared) as judge:
                result = await evaluate_shard(loaded, mine, judge, index)
            if shared:
                shared["cache"].close()
        else:
            result = await evaluate_shard(loaded, mine, None, index)
        input_path = loaded.resolve_path(loaded.config.input)
        generation.write_json(SHARD_FILE, {
            "format": FORMAT, "tool_version": __version__, "index": index, "of": count,
            "config_digest": loaded.digest, "config_text": _config_text(loaded), "base_dir": str(loaded.base_dir),
            "input": {"path": str(loaded.config.input), "sha256": file_digest(input_path)},
            "n_outputs": len(outputs), "positions": positions,
            "outputs": [o.model_dump(mode="json") for o in mine],
            "parts": [part.model_dump(mode="json") for part in result.parts],
            "accounting": result.accounting, "health": result.health,
            "nugget_lists": result.nugget_lists,
        })
        generation.commit()
    return folder


def _config_text(loaded: Any) -> str:
    if loaded.path is None or not Path(loaded.path).is_file():
        raise ConfigError("--shard needs the config file (merge reads it from the shard folders)")
    return Path(loaded.path).read_text(encoding="utf-8-sig")


# -- merge ---------------------------------------------------------------------------------------------------


def _read(folder: Path) -> dict[str, Any]:
    path = folder / SHARD_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"not a shard folder (no {SHARD_FILE}; write one with eval --shard i/n)",
                         file=str(folder)) from None
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read the shard: {error}", file=str(path)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"not a shard of this version (format {FORMAT})", file=str(path))
    return data


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
    positions = sorted(p for shard in shards for p in shard["positions"])
    if positions != list(range(first["n_outputs"])):
        raise InputError("the shards do not hold every output exactly once", file=str(where), field="positions")


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


class MergedShards:
    """An executor whose evaluation is done: the shards' results, merged, plus what needs the whole run."""

    def __init__(self, shards: Sequence[dict[str, Any]]) -> None:
        self.shards = shards

    async def evaluate(self, loaded: Any, outputs: list[RAGOutput], progress: Any) -> Evaluated:
        from open_rag_eval.executors.models import evaluate_models

        plan = stages(loaded)
        results = [ShardResult(s["index"], [EvalResult.model_validate(p) for p in s["parts"]], s["accounting"],
                               s["health"], s["nugget_lists"]) for s in self.shards]
        models = {i: await evaluate_models(spec, outputs) for i, spec in plan.models.items()}
        result = merge_results([spec.cls.name for spec in plan.shards], outputs, results, models)
        snapshots, health = [r.accounting for r in results], [r.health for r in results]
        if plan.driver:
            if needs_judge(plan.driver):
                async with judge_session(loaded.judge, loaded.base_dir, str(loaded.path or "")) as judge:
                    rest, recorded = await evaluate_rest(loaded, results, outputs, judge, result, progress)
                    snapshots.append(cast(Any, judge).accounting.snapshot())  # the run's client counts its calls
            else:
                rest, recorded = await evaluate_rest(loaded, results, outputs, None, result, progress)
            result.extend(rest)
            health.append(recorded)
        judge_view = None
        if needs_judge(loaded.evaluators):
            import types

            from open_rag_eval.judge.accounting import price_for

            config = loaded.judge
            accounting = merge_accounting(snapshots, config.model, price_for(config.model, config.prices))
            judge_view = types.SimpleNamespace(model=config.model, simulated=config.simulated is not None,
                                               accounting=accounting)
        return Evaluated(result, judge_view, merge_health(health))


async def merge_shards(folders: Sequence[Path], output_dir: Path | None = None, progress: Any = None) -> Any:
    """Check, merge and write the shards in ``folders``: the report of the single run they make up."""
    from open_rag_eval.config import load_config_text
    from open_rag_eval.report import write_report
    from open_rag_eval.run.pipeline import arun

    folders = [Path(f) for f in folders]
    shards = [_read(folder) for folder in folders]
    check_shards(folders, shards)
    first = shards[0]
    base_dir = Path(first["base_dir"])
    loaded = load_config_text(first["config_text"], base_dir=base_dir, file=str(folders[0] / SHARD_FILE),
                              outputs_given=True)
    if loaded.digest != first["config_digest"]:
        raise InputError("the config text does not match its recorded digest", file=str(folders[0] / SHARD_FILE))
    merge_caches(folders, cache_path(loaded.judge.cache, base_dir))
    outputs: list[RAGOutput | None] = [None] * first["n_outputs"]
    for shard in shards:
        for position, data in zip(shard["positions"], shard["outputs"]):
            outputs[position] = RAGOutput.model_validate(data)
    ordered = [o for o in outputs if o is not None]
    return await arun(loaded, output_dir=output_dir, outputs=ordered, progress=progress,
                      executor=MergedShards(sorted(shards, key=lambda s: s["index"])), write_report=write_report)
