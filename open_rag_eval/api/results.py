"""``Results``: one evaluation in memory -- the files the CLI writes, with pandas views of them.

A ``Results`` holds the text of every file of the run's output folder (``outputs.jsonl``, ``results.csv``,
``summary.csv``, ``results.json``, ``manifest.json``, ``report.html`` and, for a large run, the report's pages
``report-queries/page-NNNN.html``: ``store.generation.run_files``), so its tables are exactly the CLI's:
``to_pandas()`` is results.csv, ``summary()`` is summary.csv, ``details()`` is results.json (docs/RESULTS.md).
pandas is imported by the methods that return DataFrames, only.

Memory: the files' text, by design (a ``Results`` outlives its folder: ``evaluate`` without ``output_dir`` writes to a
temporary one). ``to_pandas``, ``rows`` and ``details`` build the whole run from it; ``iter_rows``, ``summary``,
``mean``, ``status``, ``simulated``, ``repr`` and ``compare`` (results.csv's values by metric, on disk: the loader's
``RowValues``) do not.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from open_rag_eval.core.errors import StorageError

from open_rag_eval.store.csv_cells import read_cell
from open_rag_eval.run.corrected import COLUMNS as CORRECTED_COLUMNS
from open_rag_eval.run.results import KEY_COLUMNS, SIMULATED_COLUMN

if TYPE_CHECKING:
    import pandas

    from open_rag_eval.report.compare import Comparison
    from open_rag_eval.report.data import ResultSet
    from open_rag_eval.run.status import RunStatus
    from open_rag_eval.scoring.verdict import Rule

__all__ = ["FolderFiles", "Results"]


class Results:
    """The results of ``evaluate``: per (query, run) scores, the summary, the details, the report."""

    def __init__(self, files: Mapping[str, str]) -> None:
        # file name -> text, as the CLI writes them: held (a copy), or a folder's read when asked for (FolderFiles)
        self.files: Mapping[str, str] = files if isinstance(files, FolderFiles) else dict(files)
        self.tracked_run: str | None = None  # the tracking backend's run id (MLflow run, Opik experiment)

    @classmethod
    def from_folder(cls, folder: str | Path) -> Results:
        """The results of a run's output folder (``open-rag-eval eval``'s, or one written by ``save``), its files
        read when asked for (``FolderFiles``): a file replaced or removed since is a ``StorageError`` naming it."""
        return cls(FolderFiles(Path(folder)))

    @contextlib.contextmanager
    def _open(self, name: str) -> Iterator[TextIO]:
        """One file's text as a stream: from its folder, or from the text held."""
        if isinstance(self.files, FolderFiles):
            with self.files.open(name) as handle:
                yield handle
        else:
            yield io.StringIO(self.files[name], newline="")

    # -- facts --------------------------------------------------------------------------------------------------

    @property
    def manifest(self) -> dict[str, Any]:
        return json.loads(self.files.get("manifest.json", "{}"))

    @property
    def simulated(self) -> bool:
        """The manifest's word (results.json's first member says the same), not results.json parsed whole."""
        manifest = self.manifest
        return bool(manifest["simulated"] if "simulated" in manifest else self.details().get("simulated"))

    @property
    def status(self) -> RunStatus:
        """Complete, or incomplete with its reasons (``run.status``): ``status.state`` is ``complete`` or
        ``incomplete``, ``status.incomplete`` lists ``{metric, n_failed, reason}``, ``status.summary()`` says it."""
        from open_rag_eval.run.status import RunStatus

        return RunStatus.from_manifest(self.manifest)

    @property
    def complete(self) -> bool:
        """False when a judged metric failed for every output (the CLI's exit 6)."""
        return self.status.complete

    @property
    def metrics(self) -> list[str]:
        return [row["metric"] for row in self.summary_rows()]

    # -- rows without pandas ------------------------------------------------------------------------------------

    def rows(self) -> list[dict[str, Any]]:
        """results.csv as dicts: ``run`` an int or ``"all"``, metrics floats (NaN when missing), ``*.error`` text,
        ``simulated_judge`` a bool. Every row of the run at once; ``iter_rows`` gives them one at a time."""
        return list(self.iter_rows())

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """``rows``, one row at a time, each read from results.csv's text as it is asked for."""
        with self._open("results.csv") as handle:
            for row in csv.DictReader(handle):
                yield _typed(row, numbers=_metric_columns(row))

    def summary_rows(self) -> list[dict[str, Any]]:
        """summary.csv as dicts, numbers as floats (NaN when missing); a run with people's labels has the corrected
        columns too (docs/calibration.md)."""
        numbers = ("mean", "std", "ci95_low", "ci95_high", "n", "n_failed", "n_undefined", "n_unavailable", "n_skipped",
                   "min", "median", "p95", "max", *(c for c in CORRECTED_COLUMNS if c != "corrected_note"))
        return [_typed(row, numbers=numbers) for row in _csv_rows(self.files["summary.csv"])]

    def mean(self, metric: str) -> float | None:
        """The summary mean of ``metric``; None when it has no value; KeyError when there is no such metric."""
        for row in self.summary_rows():
            if row["metric"] == metric:
                return None if math.isnan(row["mean"]) else row["mean"]
        raise KeyError(metric)

    # -- pandas views -------------------------------------------------------------------------------------------

    def to_pandas(self) -> pandas.DataFrame:
        """One row per (query, run) -- and per query across runs (``run == "all"``) -- with results.csv's columns."""
        import pandas

        with self._open("results.csv") as handle:
            header = next(csv.reader(handle), [])
        return pandas.DataFrame(self.rows(), columns=header)

    def summary(self) -> pandas.DataFrame:
        """One row per metric, summary.csv's columns (mean, std, 95% CI, n, n_failed, ..., status)."""
        import pandas

        return pandas.DataFrame(self.summary_rows(), columns=_header(self.files["summary.csv"]))

    def details(self) -> dict[str, Any]:
        """results.json: every output with its passages, statements, scores, errors and per-metric evidence."""
        return json.loads(self.files["results.json"])

    # -- comparison, report, files ------------------------------------------------------------------------------

    def compare(self, baseline: Results, metrics: Sequence[str] | None = None, *, seed: int = 0,
                resamples: int = 10_000) -> pandas.DataFrame:
        """These results (B) against ``baseline`` (A), paired by query as ``open-rag-eval compare A B``: mean
        difference B - A, bootstrap CI, permutation p-value, Holm across the metrics compared, verdict. ``metrics``
        None: the headline metrics both have. Queries in one side only: ``.attrs["only_baseline"]`` / ``["only_new"]``."""
        import pandas

        from open_rag_eval.report.compare import COLUMNS

        comparison = self.comparison(baseline, metrics, seed=seed, resamples=resamples)
        frame = pandas.DataFrame([{c: row[c] for c in COLUMNS} for row in comparison.rows], columns=list(COLUMNS))
        frame.attrs.update(only_baseline=comparison.only_a, only_new=comparison.only_b, skipped=comparison.skipped)
        return frame

    def comparison(self, baseline: Results, metrics: Sequence[str] | None = None, *, seed: int = 0,
                   resamples: int = 10_000, rules: Mapping[str, Rule] | None = None) -> Comparison:
        """The ``Comparison`` behind ``compare`` (``report.compare``), each metric's verdict under ``rules``."""
        from open_rag_eval.report import compare as cmp

        a, b = baseline.result_set("baseline"), self.result_set("new")
        chosen = list(metrics) if metrics is not None else cmp.default_metrics(a, b)
        return cmp.compare(a, b, chosen, seed=seed, resamples=resamples, rules=rules)

    def result_set(self, label: str) -> ResultSet:
        """These results as the report and compare read a result folder."""
        from open_rag_eval.report.loader import load_results, load_results_text

        if isinstance(self.files, FolderFiles):  # read as a stream from the folder (its files checked first)
            self.files.check("results.csv", "manifest.json")
            return load_results(self.files.folder, label)
        return load_results_text(self.files["results.csv"], self.manifest, label)

    def report(self, path: str | Path) -> Path:
        """Write the HTML report (the run's report.html) to ``path`` -- with a large run's pages in
        ``report-queries/`` beside it, linking back to it, as ``open-rag-eval report DIR -o PATH`` does; return it."""
        from open_rag_eval.report.paged import clear_pages, relink
        from open_rag_eval.store.fileio import atomic_write_text
        from open_rag_eval.run.generation import PAGES_DIR

        path = Path(path)
        clear_pages(path.parent / PAGES_DIR)
        for name, text in self.files.items():
            if name.startswith(f"{PAGES_DIR}/"):
                atomic_write_text(path.parent / name, relink(text, path.name))
        atomic_write_text(path, self.files["report.html"])
        return path

    def save(self, folder: str | Path) -> Path:
        """Write the CLI's files into ``folder`` through the one output writer (complete or not at all; other
        files in the folder are kept). Return the folder."""
        from open_rag_eval.run.generation import GENERATION_FILES, Generation

        for name in self.files:
            top, *rest = name.split("/")
            if top not in GENERATION_FILES or any(part in ("", ".", "..") for part in rest):
                raise ValueError(f"not a file of a run: {name!r}")
        with Generation(Path(folder)) as generation:
            with generation.writing():
                for name, text in self.files.items():
                    generation.write_text(name, text)
            generation.commit()
        if isinstance(self.files, FolderFiles) and self.files.folder.resolve() == generation.folder.resolve():
            self.files = FolderFiles(self.files.folder)  # saved over its own folder: the files it now reads
        return generation.folder

    def __repr__(self) -> str:
        rows = self.summary_rows()
        shown = ", ".join(f"{r['metric']}={r['mean']:.3f}" for r in rows[:4] if not math.isnan(r["mean"]))
        state = "" if self.complete else "; INCOMPLETE: " + self.status.summary()
        with self._open("results.csv") as handle:
            count = sum(1 for _ in csv.reader(handle)) - 1
        return f"Results({max(count, 0)} rows, {len(rows)} metrics{': ' + shown if shown else ''}{state})"


class FolderFiles(Mapping[str, str]):
    """A run folder's files as ``Results.files``: name -> text, each read from the folder when asked for and not
    kept, so a ``Results`` of a large run holds none of them until then. The folder is listed (and each file's
    identity noted) when it is read; a file replaced or removed since is a ``StorageError`` naming it, so one
    ``Results`` never mixes two runs: read the folder again."""

    def __init__(self, folder: Path) -> None:
        from open_rag_eval.run.generation import run_files

        self.folder = folder
        self._paths = run_files(folder)
        self._stamps = {name: _stamp(path) for name, path in self._paths.items()}

    def check(self, *names: str) -> None:
        for name in names:
            if name in self._paths and _stamp(self._paths[name]) != self._stamps[name]:
                raise StorageError("replaced or removed since Results.from_folder read its folder: read it again",
                                   path=self._paths[name])

    def __getitem__(self, name: str) -> str:
        with self.open(name) as handle:
            return handle.read()

    @contextlib.contextmanager
    def open(self, name: str) -> Iterator[TextIO]:
        path = self._paths[name]
        self.check(name)
        try:
            handle = path.open(encoding="utf-8")  # newlines as read_text reads them
        except OSError as error:
            raise StorageError(f"cannot read: {error.strerror}", path=path) from error
        with handle:
            yield handle

    def __iter__(self) -> Iterator[str]:
        return iter(self._paths)

    def __len__(self) -> int:
        return len(self._paths)


def _stamp(path: Path) -> tuple[int, int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def _header(text: str) -> list[str]:
    return next(csv.reader(io.StringIO(text, newline="")), [])


def _metric_columns(row: dict[str, str]) -> list[str]:
    return [name for name in row if name not in (*KEY_COLUMNS, SIMULATED_COLUMN) and not name.endswith(".error")]


def _typed(row: dict[str, str], *, numbers: Sequence[str]) -> dict[str, Any]:
    typed: dict[str, Any] = {}
    for name, cell in row.items():
        if name in numbers:
            typed[name] = float(cell) if cell.strip() else math.nan
        elif name == "run":
            typed[name] = int(cell) if cell.isascii() and cell.isdigit() else cell
        elif name == SIMULATED_COLUMN:
            typed[name] = cell == "true"
        else:
            typed[name] = read_cell(cell)
    return typed
