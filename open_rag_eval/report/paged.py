"""The report of a run of any size: ``report.html`` stays small and every query is on a page of its own folder.

results.json is read once as a stream (``store.json_items``). What the summary sections need of each output (ids,
scores, failure reasons, UMBRELA grades) is kept; each whole output is set aside in a temporary file and read back
when its query is drawn. report.html is at most ``REPORT_BYTES``, whatever the run: each query's share of it (its
table row and drill-down) is measured by rendering it alone. Up to ``INLINE_QUERIES`` queries that fit, report.html
holds every query in full (the page is the one ``render_report`` makes). Beyond, report.html holds in full the
``WORST_QUERIES`` weakest queries on the table's first column, then a seeded sample, as many as fit in
``INLINE_QUERIES`` queries and ``REPORT_BYTES`` (a query too large for it is on its page only), and links to
``report-queries/page-NNNN.html``: up to ``PAGE_QUERIES`` queries and about ``PAGE_BYTES`` of their results a page,
each page self-contained like the report (its own table and drill-down, inline CSS and JS, no network), in the
order the queries first appear. Memory holds one page at a time. The summary sections grow with the number of
metrics, not of outputs; the list of pages by one line per page.
"""

from __future__ import annotations

import heapq
import json
import math
import random
import re
import tempfile
from array import array
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any, overload
from urllib.parse import quote

from open_rag_eval.report.data import read_json
from open_rag_eval.report.drilldown import esc
from open_rag_eval.report.digest import Digest
from open_rag_eval.report.html_report import (RunData, _columns, _drill, _page, _queries_table, _render, _summary,
                                              csv_items)
from open_rag_eval.core.missing import FAILED
from open_rag_eval.report.drilldown import missing_counts
from open_rag_eval.core.catalogue import lower_is_better
from open_rag_eval.store.json_items import read_items
from open_rag_eval.store.fileio import atomic_write_text
from open_rag_eval.run.generation import PAGES_DIR

__all__ = ["INLINE_QUERIES", "PAGES_DIR", "PAGE_BYTES", "PAGE_NAME", "PAGE_QUERIES", "REPORT_BYTES", "WORST_QUERIES",
           "clear_pages", "relink", "write_paged", "write_report"]

INLINE_QUERIES = 200  # queries report.html holds in full, at most
REPORT_BYTES = 10_000_000  # report.html's size, at most, whatever the run (the queries in full fit in what is left)
WORST_QUERIES = 100
PAGE_QUERIES = 100  # queries a page of report-queries/ holds, at most
PAGE_BYTES = 4_000_000  # and at most this much of their results.json (one query at least): pages that open quickly
_SLACK = 16  # bytes a query's size is measured with beyond its own: the digits of its position on the page

Group = tuple[str, str, list, Any]


class _SetAside:
    """Whole items in a temporary file, read back by position."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile()

    def add(self, item: dict[str, Any]) -> tuple[int, int]:
        """Set ``item`` aside; where it is: (offset, size)."""
        data = json.dumps(item, ensure_ascii=False).encode("utf-8")
        offset = self._file.seek(0, 2)
        self._file.write(data)
        return offset, len(data)

    def get(self, offset: int, size: int) -> dict[str, Any]:
        self._file.seek(offset)
        return json.loads(self._file.read(size))

    def close(self) -> None:
        self._file.close()


def _light(item: dict[str, Any]) -> dict[str, Any]:
    """What the summary sections read of an item."""
    grades = ((item.get("details") or {}).get("umbrela") or {}).get("grades") or []
    light: dict[str, Any] = {key: item.get(key) for key in ("query_id", "query", "run", "runs") if key in item}
    light.update(scores=item.get("scores") or {}, errors=item.get("errors") or {})
    if grades:
        light["details"] = {"umbrela": {"grades": [{"grade": g.get("grade")} for g in grades if isinstance(g, dict)]}}
    return light


class _Index:
    """Where each query's items are in the set-aside file, queries in the run's order (first seen among the
    outputs, then the per-query rows of queries without an output); a few numbers a query, a few an output."""

    def __init__(self, aside: _SetAside) -> None:
        self._aside = aside
        self.ids: list[str] = []
        self._position: dict[str, int] = {}
        # 4 bytes where a count or a position among outputs is enough, 8 for places in files
        self._first, self._last = array("i"), array("i")  # per query: its first and last output (-1: none)
        self._bytes, self._failed = array("q"), array("i")  # per query: of its outputs
        self._cross = array("q")  # per query: its per-query row's offset, size and failed values (-1: none)
        self._cross_size, self._cross_failed = array("I"), array("i")
        self._errors = array("i")  # per query: its outputs that failed as a whole (a system error)
        self.of_output = array("i")  # per output: its query
        self._next, self._at, self._size = array("i"), array("q"), array("I")  # per output

    def __len__(self) -> int:
        return len(self.ids)

    def _query(self, query_id: str) -> int:
        position = self._position.get(query_id)
        if position is None:
            position = self._position[query_id] = len(self.ids)
            self.ids.append(query_id)
            for column in (self._first, self._last, self._cross):
                column.append(-1)
            for column in (self._bytes, self._failed, self._cross_size, self._cross_failed, self._errors):
                column.append(0)
        return position

    def add(self, section: str, item: dict[str, Any], light: dict[str, Any]) -> None:
        offset, size = self._aside.add(item)
        query = self._query(str(light.get("query_id")))
        failed = missing_counts([light])[FAILED]
        if section != "outputs":  # a query's row across its runs (the last one, when there are several)
            self._cross[query], self._cross_size[query], self._cross_failed[query] = offset, size, failed
            return
        output = len(self.of_output)
        for column, value in ((self.of_output, query), (self._next, -1), (self._at, offset), (self._size, size)):
            column.append(value)
        if self._last[query] < 0:
            self._first[query] = output
        else:
            self._next[self._last[query]] = output
        self._last[query] = output
        self._bytes[query] += size
        self._failed[query] += failed
        self._errors[query] += 1 if item.get("error") else 0

    def size(self, query: int) -> int:
        """Bytes of the query's items in results.json."""
        return self._bytes[query] + (self._cross_size[query] if self._cross[query] >= 0 else 0)

    def failed(self, query: int) -> int:
        return self._failed[query] + (self._cross_failed[query] if self._cross[query] >= 0 else 0)

    def failed_in_full(self, query: int) -> int:
        """``missing_counts`` of the query's whole items: its failed values and its outputs that failed whole."""
        return self.failed(query) + self._errors[query]

    def seal(self) -> None:
        """No more items: the map from query id to position is let go (memory; ``position`` knows none after)."""
        self._position = {}

    def position(self, query_id: str) -> int | None:
        return self._position.get(query_id)

    def text(self, query: int) -> str:
        """The query's text as ``group`` gives it (its first output's, else its per-query row's)."""
        if self._first[query] >= 0:
            return self._aside.get(self._at[self._first[query]], self._size[self._first[query]]).get("query") or ""
        if self._cross[query] >= 0:
            return self._aside.get(self._cross[query], self._cross_size[query]).get("query") or ""
        return ""

    def group(self, query: int) -> Group:
        """The query with its items read back in full: (id, text, runs in run order, its per-query row)."""
        runs = []
        output = self._first[query]
        while output >= 0:
            runs.append(self._aside.get(self._at[output], self._size[output]))
            output = self._next[output]
        cross = self._aside.get(self._cross[query], self._cross_size[query]) if self._cross[query] >= 0 else None
        text = (runs[0] if runs else cross or {}).get("query") or ""
        return self.ids[query], text, sorted(runs, key=lambda o: o.get("run") or 0), cross

    def groups(self, queries: Iterable[int]) -> list[Group]:
        return [self.group(q) for q in queries]

    def means(self, digest: Digest, metric: str) -> array[float]:
        """Per query: the mean of ``metric`` over its outputs (``_query_means``), NaN without a value."""
        return digest.values.means(metric, len(self.ids), self.of_output)


class _Without(Sequence[int]):
    """``range(n)`` without a few numbers, without listing the rest (a population for ``random.sample``)."""

    def __init__(self, n: int, taken: Iterable[int]) -> None:
        self._n, self._taken = n, sorted(set(taken))

    def __len__(self) -> int:
        return self._n - len(self._taken)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[int]: ...

    def __getitem__(self, index: int | slice) -> int | Sequence[int]:
        if isinstance(index, slice) or not 0 <= index < len(self):
            raise IndexError(index)
        value = index
        for taken in self._taken:
            if taken > value:
                break
            value += 1
        return value


def _load(directory: Path, aside: _SetAside) -> tuple[RunData, _Index]:
    index, digest = _Index(aside), Digest()

    def keep(section: str, item: dict[str, Any]) -> None:
        light = _light(item)
        index.add(section, item, light)
        digest.add(light, output=section == "outputs")

    try:
        results = read_items(directory / "results.json", keep)
        if not results and not len(index):
            for section, item in csv_items(directory):
                keep(section, item)
    except BaseException:
        digest.close()
        raise
    return RunData(directory, read_json(directory / "manifest.json"), results, [], [], _summary(directory, results),
                   digest), index


def _candidates(index: _Index, run: RunData, columns: Sequence[str]) -> list[int]:
    """The queries report.html shows in full, best first: the ``WORST_QUERIES`` weakest on the first column (missing
    means last), then a seeded sample of ``INLINE_QUERIES`` of the others."""
    order: list[int] = []
    if columns:
        metric = columns[0]
        sign = -1.0 if lower_is_better(metric) else 1.0
        means = index.means(run.items, metric)

        def weakness(query: int) -> tuple[int, float]:
            value = means[query]
            return (1, 0.0) if not math.isfinite(value) else (0, sign * value)

        order = heapq.nsmallest(WORST_QUERIES, range(len(index)), key=weakness)  # = sorted(...)[:WORST_QUERIES]
    rest = _Without(len(index), order)
    return order + random.Random(0).sample(rest, min(len(rest), INLINE_QUERIES))


def _chosen(candidates: Sequence[int], size: Callable[[int], int], budget: int) -> list[int]:
    """The candidates that fit: at most ``INLINE_QUERIES`` queries of at most ``budget`` bytes in all (a query too
    large to fit is left to its page); in the run's order."""
    picked: list[int] = []
    used = 0
    for query in candidates:
        if len(picked) == INLINE_QUERIES:
            break
        bytes_ = size(query)
        if used + bytes_ <= budget:
            picked.append(query)
            used += bytes_
    return sorted(picked)


class _Sizes:
    """What one query adds to report.html, in bytes: its row of the table and its drill-down, rendered alone (one
    query in memory at a time) plus ``_SLACK`` for the digits of its position."""

    def __init__(self, run: RunData, columns: Sequence[str], index: _Index) -> None:
        self._run, self._columns, self._index = run, columns, index
        self._empty = _bytes(_queries_table([], columns))
        self._known: dict[int, int] = {}

    def __call__(self, query: int) -> int:
        if query not in self._known:
            whole = [self._index.group(query)]
            self._known[query] = (_bytes(_queries_table(whole, self._columns)) - self._empty
                                  + _bytes(_drill(whole, self._columns, self._run.manifest)) + _SLACK)
        return self._known[query]

    def fit(self, queries: Iterable[int], room: int) -> bool:
        """Whether all of ``queries`` fit in ``room`` bytes (measured until they do not)."""
        for query in queries:
            room -= self(query)
            if room < 0:
                return False
        return True


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _chunks(index: _Index) -> list[range]:
    """The queries of each page, in the run's order: ``PAGE_QUERIES`` at most, and no more than ``PAGE_BYTES`` of
    their results (one query at least)."""
    chunks: list[range] = []
    start, size = 0, 0
    for query in range(len(index)):
        bytes_ = index.size(query)
        if query > start and (query - start == PAGE_QUERIES or size + bytes_ > PAGE_BYTES):
            chunks.append(range(start, query))
            start, size = query, 0
        size += bytes_
    if len(index):
        chunks.append(range(start, len(index)))
    return chunks


PAGE_NAME = re.compile(r"page-[0-9]{4,}\.html")  # every name _page_name makes, and nothing else


def _page_name(number: int) -> str:
    return f"page-{number:04d}.html"


def _every_query(index: _Index, chunks: Sequence[range], shown: int) -> str:
    items = []
    for number, chunk in enumerate(chunks, start=1):
        failed = sum(index.failed(query) for query in chunk)
        items.append(f'<li><a href="{PAGES_DIR}/{_page_name(number)}">queries {chunk.start + 1}–{chunk.stop}</a> '
                     f'<span class="muted">{esc(index.ids[chunk.start])} … '
                     f'{esc(index.ids[chunk.stop - 1])}{f" · {failed} failed values" if failed else ""}</span></li>')
    return (f'<h2>Every query</h2><p class="legend" id="every-query">This run has {len(index)} queries: below are '
            f'the {shown} shown in full here (the weakest on the first column, then a random sample, seed 0; at most '
            f'{INLINE_QUERIES}, within {REPORT_BYTES / 1e6:g} MB for this file). Every query is on one of these '
            f'{len(chunks)} pages, up to {PAGE_QUERIES} a page, in the run’s order (files in {PAGES_DIR}/ beside this '
            f'report).</p><ol class="pages" id="pages">{"".join(items)}</ol>')


def _back_link(report: str) -> str:
    return f'<a href="../{esc(quote(report))}">report</a>'


def relink(page: str, report: str) -> str:
    """A page written beside ``report.html``, linking back to the report named ``report`` instead."""
    return page.replace(_back_link("report.html"), _back_link(report))


def _nav(number: int, pages: int, report: str) -> str:
    links = [_back_link(report)]
    if number > 1:
        links.append(f'<a href="{_page_name(number - 1)}" rel="prev">previous page</a>')
    if number < pages:
        links.append(f'<a href="{_page_name(number + 1)}" rel="next">next page</a>')
    return f'<p class="legend" id="nav">page {number} of {pages} · {" · ".join(links)}</p>'


def _write_pages(folder: Path, index: _Index, chunks: Sequence[range], columns: Sequence[str],
                 run: RunData, report: str) -> None:
    clear_pages(folder)
    folder.mkdir(parents=True, exist_ok=True)
    banner = ('<p class="banner">The judge was simulated: these numbers test the pipeline, they are not real '
              'judgments.</p>') if run.simulated else ""
    for number, chunk in enumerate(chunks, start=1):
        part = index.groups(chunk)
        title = f"open-rag-eval report: queries {chunk.start + 1}–{chunk.stop}"
        nav = _nav(number, len(chunks), report)
        body = (f'<h1>{title}</h1>{banner}{nav}<h2>Queries</h2>{_queries_table(part, columns)}'
                f'<h2>Drill-down</h2>{_drill(part, columns, run.manifest)}{nav}')
        atomic_write_text(folder / _page_name(number), _page(title, body))


def clear_pages(folder: Path) -> None:
    """Remove the pages of an earlier report (only our page files; the folder when nothing else is in it)."""
    if not folder.is_dir():
        return
    for page in folder.glob("page-*.html"):
        page.unlink()
    if not any(folder.iterdir()):
        folder.rmdir()


def write_paged(directory: Path, path: Path) -> Path:
    """Write the report of ``directory`` to ``path`` (pages, when there are any, beside it); report.html is at most
    ``REPORT_BYTES`` whatever the run's size."""
    aside = _SetAside()
    try:
        run, index = _load(directory, aside)
        index.seal()
        try:
            return _write(run, index, path)
        finally:
            run.items.close()
    finally:
        aside.close()


def _write(run: RunData, index: _Index, path: Path) -> Path:
    columns = _columns(run)
    folder = path.parent / PAGES_DIR
    size = _Sizes(run, columns, index)
    if len(index) <= INLINE_QUERIES:
        room = REPORT_BYTES - _bytes(_render(run, [], columns))
        if size.fit(range(len(index)), room):
            clear_pages(folder)
            atomic_write_text(path, _render(run, index.groups(range(len(index))), columns))
            return path
    chunks = _chunks(index)
    _write_pages(folder, index, chunks, columns, run, path.name)
    room = REPORT_BYTES - _bytes(_render(run, [], columns, _every_query(index, chunks, INLINE_QUERIES)))
    chosen = _chosen(_candidates(index, run, columns), size, room)
    atomic_write_text(path, _render(run, index.groups(chosen), columns, _every_query(index, chunks, len(chosen))))
    return path


def write_report(output_dir: Path, path: Path | None = None) -> Path:
    """Write ``report.html`` (or ``path``) for ``output_dir`` atomically and return its path. It is at most
    ``REPORT_BYTES``: up to ``INLINE_QUERIES`` queries that fit, every query is on the page in full;
    beyond, the worst and a sample that fit are, and every query is on the pages of ``report-queries/`` beside it.
    results.json is read as a stream."""
    path = Path(output_dir) / "report.html" if path is None else Path(path)
    return write_paged(Path(output_dir), path)
