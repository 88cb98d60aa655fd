"""The one output writer: a run's result files appear together, complete, or not at all.

    with Generation(out, keep=RESUME_FILES) as generation:   # checks the folder, takes its lock
        generation.write_text("results.csv", text)           # into the fresh folder .<out>.partial beside it
        ...
        generation.commit()                                  # swap: .<out>.partial becomes <out>

``commit`` moves every entry of the old folder that a run does not write (the user's own files, an input such as
``answers.csv``, ``sweeps/``, a cache) into the new folder, renames the old folder to ``.<out>.old``, renames the
new one to ``<out>`` and deletes the old one. A run killed at any point leaves either the previous complete set or
the new one; the next run (holding the lock) finishes or undoes what was left. Any write failure (disk full,
permissions) is a ``StorageError`` naming the path, and the previous results stay as they were.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from open_rag_eval.core.errors import StorageError
from open_rag_eval.store.fileio import atomic_write_json, atomic_write_text, fsync_dir
from open_rag_eval.store.lock import FolderLock, held_by

__all__ = ["GENERATION_FILES", "PAGES_DIR", "Generation", "check_output_folder", "real_folder", "run_files"]

log = logging.getLogger(__name__)

PAGES_DIR = "report-queries"  # the report's per-query pages of a large run, beside report.html (report/paged.py)

# the files (and the one folder) a run writes; everything else in an output folder is carried over untouched
GENERATION_FILES = frozenset({"outputs.jsonl", "results.csv", "summary.csv", "results.json", "manifest.json",
                              "report.html", PAGES_DIR, "corrected.json"})  # corrected.json: a run with labels


def real_folder(folder: Path) -> Path:
    """The absolute folder with symlinks resolved (a symlinked output folder is written where it points)."""
    return Path(os.path.realpath(os.path.expanduser(str(folder))))


def run_files(folder: Path) -> dict[str, Path]:
    """The run's files in ``folder``: name relative to it (``report-queries/page-0001.html`` for a page) -> path,
    sorted. What ``open-rag-eval eval`` writes, what ``Results`` holds and saves, what tracking logs."""
    files: dict[str, Path] = {}
    for name in sorted(GENERATION_FILES):
        path = folder / name
        if path.is_file():
            files[name] = path
        elif path.is_dir() and not path.is_symlink():
            files.update((f"{name}/{entry.name}", entry) for entry in sorted(path.iterdir())
                         if entry.is_file() and not entry.name.startswith("."))
    return files


def _ours(name: str) -> bool:
    """Written by a run (a result file, a journal, a temp file): never carried over between generations."""
    return name in GENERATION_FILES or name.startswith(".open-rag-eval-") or (name.startswith(".") and
                                                                              name.endswith(".tmp"))


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_output_folder(folder: Path) -> None:
    """Raise ``StorageError`` when ``folder`` cannot become an output folder (creates nothing)."""
    if folder.exists() and not folder.is_dir():
        raise StorageError("the output folder is a file, not a folder: choose another output folder", path=folder)
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        raise StorageError("the output folder is read-only: make it writable or choose another output folder",
                           path=folder)
    base = _nearest_existing(folder.parent)
    if not base.is_dir():
        raise StorageError("is a file, so the output folder cannot be created under it", path=base)
    if not os.access(base, os.W_OK | os.X_OK):
        raise StorageError("the folder holding the output folder is read-only (results are written beside it, "
                           "then swapped in): make it writable or choose another output folder", path=base)


def _fail(action: str, path: Path, error: OSError, folder: Path) -> StorageError:
    reason = error.strerror or str(error)
    return StorageError(f"cannot {action}: {reason}; the previous results in {folder} are unchanged", path=path)


class Generation:
    """A fresh set of result files for ``folder``; ``keep`` names files of an unfinished run worth reusing."""

    def __init__(self, folder: Path, *, keep: Collection[str] = ()) -> None:
        self.folder = real_folder(folder)
        self.path = self.folder.parent / f".{self.folder.name}.partial"  # the fresh folder being written
        self._old = self.folder.parent / f".{self.folder.name}.old"
        self._keep = frozenset(keep)
        self._lock = FolderLock(self.folder)
        self._committed = False

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def __enter__(self) -> Generation:
        check_output_folder(self.folder)
        try:
            self.folder.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StorageError(f"cannot create the folder: {error.strerror}", path=self.folder.parent) from None
        self._lock.acquire()
        try:
            self._check_nested()
            self._recover()
            self._prepare()
        except BaseException:
            self._lock.release()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        try:
            if not self._committed:
                self._discard()
        finally:
            self._lock.release()

    # -- writing -----------------------------------------------------------------------------------------------

    def write_text(self, name: str, text: str) -> Path:
        path = self.path / name
        try:
            atomic_write_text(path, text)
        except OSError as error:
            raise _fail("write", path, error, self.folder) from None
        return path

    def write_json(self, name: str, data: Any) -> Path:
        path = self.path / name
        try:
            atomic_write_json(path, data)
        except OSError as error:
            raise _fail("write", path, error, self.folder) from None
        return path

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Writes made inside (by any writer into ``self.path``): a failure is the one-line ``StorageError``."""
        try:
            yield
        except OSError as error:
            raise _fail("write", Path(error.filename or self.path), error, self.folder) from None

    def remove(self, name: str) -> None:
        (self.path / name).unlink(missing_ok=True)

    def commit(self) -> None:
        """Swap the fresh folder in, carrying over every entry of the old one that a run does not write."""
        try:
            fsync_dir(self.path)
            if self.folder.exists():
                self._carry_over()
                os.rename(self.folder, self._old)
            os.rename(self.path, self.folder)
            fsync_dir(self.folder.parent)
        except OSError as error:
            self._recover()  # undo a half swap: the previous folder comes back
            raise _fail("swap in the new results", self.folder, error, self.folder) from None
        self._committed = True
        shutil.rmtree(self._old, ignore_errors=True)

    # -- internals ---------------------------------------------------------------------------------------------

    def _check_nested(self) -> None:
        """Another run writing into a folder inside this one: swapping would pull its files from under it."""
        if not self.folder.is_dir():
            return
        for entry in self.folder.glob(".*.lock"):
            pid = held_by(entry)
            if pid is not None:
                inner = self.folder / entry.name[1:-len(".lock")]
                raise StorageError(f"another run (pid {pid}) is writing into {inner}, inside this output folder: "
                                   "wait for it to finish or choose another output folder", path=self.folder)

    def _carry_over(self) -> None:
        self._check_nested()
        for entry in sorted(self.folder.iterdir()):
            if _ours(entry.name):
                continue
            target = self.path / entry.name
            if target.exists() or target.is_symlink():
                continue  # this run wrote a file of that name too: it is a result, and the new one wins
            os.rename(entry, target)

    def _recover(self) -> None:
        """Finish or undo what a killed run left: a half swap, carried-over entries still in the fresh folder."""
        if self._old.exists():
            if self.folder.exists():
                shutil.rmtree(self._old, ignore_errors=True)  # killed after the swap: only the old files are left
            else:
                os.rename(self._old, self.folder)  # killed between the two renames: the previous results return
                log.info("restored the previous results in %s (a run was stopped while swapping them)", self.folder)
        if self.path.is_dir():
            for entry in sorted(self.path.iterdir()):
                if not _ours(entry.name) and not (self.folder / entry.name).exists():
                    self.folder.mkdir(exist_ok=True)
                    os.rename(entry, self.folder / entry.name)  # carried over before a kill: put it back

    def _prepare(self) -> None:
        """A fresh folder: the files an unfinished run left there are removed, except the ``keep`` files."""
        try:
            if self.path.exists() and not self.path.is_dir():
                self.path.unlink()
            self.path.mkdir(exist_ok=True)
            for entry in self.path.iterdir():
                if _ours(entry.name) and entry.name not in self._keep:
                    _remove(entry)
        except OSError as error:
            raise StorageError(f"cannot prepare the folder for new results: {error.strerror}",
                               path=self.path) from None

    def _discard(self) -> None:
        """After a failure: free the space, keeping only what the next run may reuse."""
        if not self.path.is_dir():
            return
        for entry in self.path.iterdir():
            if _ours(entry.name) and entry.name not in self._keep:
                _remove(entry)
        if not any(self.path.iterdir()):
            self.path.rmdir()


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)
