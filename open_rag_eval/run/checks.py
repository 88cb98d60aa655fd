"""Path checks made before any work: inputs the new results would replace, and (for ``validate``) every path a run
would write -- the output folder, the judge cache, and the databases the caller hands down (``validate`` hands the
sweep history's). Nothing is created or changed here."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from open_rag_eval.core.errors import ConfigError, OpenRagEvalError, StorageError
from open_rag_eval.evaluators.base import needs_judge
from open_rag_eval.run.generation import GENERATION_FILES, check_output_folder, real_folder
from open_rag_eval.store.lock import held_by, lock_path

if TYPE_CHECKING:
    from open_rag_eval.config import LoadedConfig

__all__ = ["DatabaseAt", "check_inputs_outside", "output_folder", "path_problems"]

# where a database a run would use lives, and its schema (``store.sqlite.Database``); raises StorageError when the
# path itself is wrong
DatabaseAt = Callable[[], tuple[Path | None, Any]]


def output_folder(loaded: LoadedConfig, override: Path | None = None) -> Path:
    return real_folder(override or loaded.resolve_path(loaded.config.output_dir))


def _inputs(loaded: LoadedConfig) -> Iterator[tuple[str, Path]]:
    """(YAML path, file) of everything a run reads."""
    config = loaded.config
    if loaded.path is not None:
        yield "the config file", loaded.path
    if config.input:
        yield "input", loaded.resolve_path(config.input)
    if config.connector is not None:
        yield "connector.queries", loaded.resolve_path(config.connector.queries)
    for i, spec in enumerate(loaded.evaluators):
        for name, value in spec.files().items():
            yield f"evaluators[{i}].{name}", loaded.resolve_path(value)


def check_inputs_outside(loaded: LoadedConfig, out: Path) -> None:
    """Refuse (exit 2) a run whose new results would replace one of its own inputs, or move the folder it runs in.

    Inputs elsewhere in the output folder (e.g. ``answers.csv`` beside vectara's results) are carried over into the
    new results untouched; an input that *is* a result file (``outputs.jsonl``, ``results.csv``...) is refused."""
    file = str(loaded.path or "")
    cwd = real_folder(Path.cwd())
    if cwd == out or out in cwd.parents:
        raise ConfigError(f"the output folder {out} holds the current folder, and a run replaces its output folder: "
                          "choose a folder of its own (e.g. results/)", path="output_dir", file=file)
    for where, path in _inputs(loaded):
        real = real_folder(path)
        if real == out:
            raise ConfigError(f"{where} {path} is the output folder, which this run replaces: write the results to "
                              "another folder (--output-dir)", path="output_dir", file=file)
        if out in real.parents:
            top = real.relative_to(out).parts[0]
            if top in GENERATION_FILES:
                raise ConfigError(f"{where} {path} is inside the output folder {out} and this run would replace it: "
                                  "copy it elsewhere first, or write the results to another folder (--output-dir)",
                                  path="output_dir", file=file)


def path_problems(loaded: LoadedConfig, out: Path | None = None, *, databases: Sequence[DatabaseAt] = ()
                  ) -> list[OpenRagEvalError]:
    """Everything that would stop a run at a path: the output folder, its inputs, the judge cache and ``databases``
    (the edges' own, e.g. the sweep history)."""
    from open_rag_eval.judge.cache import CACHE_DB, cache_path
    from open_rag_eval.store.sqlite import probe

    out = out or output_folder(loaded)
    problems: list[OpenRagEvalError] = []
    for check in (lambda: check_inputs_outside(loaded, out), lambda: check_output_folder(out),
                  lambda: _lock_holder(out)):
        try:
            check()
        except OpenRagEvalError as error:
            problems.append(error)
    where: list[DatabaseAt] = list(databases)
    if needs_judge(spec.build() for spec in loaded.evaluators):
        where.insert(0, lambda: (cache_path(loaded.judge.cache, loaded.base_dir), CACHE_DB))
    found = []
    for at in where:
        try:
            found.append(at())
        except StorageError as error:
            problems.append(error)
    for path, db in found:
        if path is not None and (problem := probe(path, db)) is not None:
            problems.append(problem)
    return problems


def _lock_holder(out: Path) -> None:
    """A run holding the output folder's lock right now (a stale lock file is not a problem: it is taken over)."""
    pid = held_by(lock_path(out))
    if pid is not None:
        raise StorageError(f"the output folder is in use by a running run (pid {pid})", path=out)
