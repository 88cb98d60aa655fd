"""The report of a run of any size: ``report.html`` stays small and every query is on a page of its own folder.

results.json is read once as a stream (``report.stream``). What the summary sections need of each output (ids,
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

import json
import math
import random
import re
import tempfile
from urllib.parse import quote
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from open_rag_eval.report.data import read_json
from open_rag_eval.report.drilldown import esc
from open_rag_eval.report.html_report import (
    RunData,
    _columns,
    _drill,
    _grouped,
    _outputs_from_csv,
    _page,
    _queries_table,
    _query_means,
    _render,
    _summary,
)
from open_rag_eval.core.missing import FAILED
from open_rag_eval.report.drilldown import missing_counts
from open_rag_eval.core.catalogue import lower_is_better
from open_rag_eval.report.stream import read_items
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
        self._where: dict[int, tuple[int, int]] = {}

    def add(self, item: dict[str, Any]) -> None:
        data = json.dumps(item, ensure_ascii=False).encode("utf-8")
        self._where[id(item)] = (self._file.seek(0, 2), len(data))
        self._file.write(data)

    def get(self, offset: int, size: int) -> dict[str, Any]:
        self._file.seek(offset)
        return json.loads(self._file.read(size))

    def close(self) -> None:
        self._file.close()


def _light(item: dict[str, Any]) -> dict[str, Any]:
    """What the summary sections read of an item; ``_at`` says where the whole item was set aside."""
    grades = ((item.get("details") or {}).get("umbrela") or {}).get("grades") or []
    light: dict[str, Any] = {key: item.get(key) for key in ("query_id", "query", "run", "runs") if key in item}
    light.update(scores=item.get("scores") or {}, errors=item.get("errors") or {})
    if grades:
        light["details"] = {"umbrela": {"grades": [{"grade": g.get("grade")} for g in grades if isinstance(g, dict)]}}
    return light


def _load(directory: Path, aside: _SetAside) -> RunData:
    outputs: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []

    def keep(section: str, item: dict[str, Any]) -> None:
        aside.add(item)
        light = _light(item)
        light["_at"] = aside._where.pop(id(item))
        (outputs if section == "outputs" else queries).append(light)

    results = read_items(directory / "results.json", keep)
    if not results and not outputs and not queries:
        outputs, queries = _outputs_from_csv(directory)
    return RunData(directory, read_json(directory / "manifest.json"), results, outputs, queries,
                   _summary(directory, results))


def _whole(groups: Sequence[Group], aside: _SetAside) -> list[Group]:
    """The groups with their items read back in full."""
    def full(item: Any) -> Any:
        return aside.get(*item["_at"]) if isinstance(item, dict) and "_at" in item else item

    return [(qid, query, [full(o) for o in runs], full(cross)) for qid, query, runs, cross in groups]


def _candidates(groups: Sequence[Group], columns: Sequence[str]) -> list[int]:
    """The queries report.html shows in full, best first: the ``WORST_QUERIES`` weakest on the first column (missing
    means last), then a seeded sample of ``INLINE_QUERIES`` of the others."""
    order: list[int] = []
    if columns:
        metric = columns[0]
        sign = -1.0 if lower_is_better(metric) else 1.0

        def weakness(index: int) -> tuple[int, float]:
            value = _query_means(groups[index][2]).get(metric)
            return (1, 0.0) if value is None or not math.isfinite(value) else (0, sign * value)

        order = sorted(range(len(groups)), key=weakness)[:WORST_QUERIES]
    taken = set(order)
    rest = [i for i in range(len(groups)) if i not in taken]
    return order + random.Random(0).sample(rest, min(len(rest), INLINE_QUERIES))


def _chosen(groups: Sequence[Group], columns: Sequence[str], size: Callable[[Group], int], budget: int) -> list[Group]:
    """The candidates that fit: at most ``INLINE_QUERIES`` queries of at most ``budget`` bytes in all (a query too
    large to fit is left to its page); in the run's order."""
    picked: list[int] = []
    used = 0
    for index in _candidates(groups, columns):
        if len(picked) == INLINE_QUERIES:
            break
        bytes_ = size(groups[index])
        if used + bytes_ <= budget:
            picked.append(index)
            used += bytes_
    return [groups[i] for i in sorted(picked)]


class _Sizes:
    """What one query adds to report.html, in bytes: its row of the table and its drill-down, rendered alone (one
    query in memory at a time) plus ``_SLACK`` for the digits of its position."""

    def __init__(self, run: RunData, columns: Sequence[str], aside: _SetAside) -> None:
        self._run, self._columns, self._aside = run, columns, aside
        self._empty = _bytes(_queries_table([], columns))
        self._known: dict[str, int] = {}

    def __call__(self, group: Group) -> int:
        if group[0] not in self._known:
            whole = _whole([group], self._aside)
            self._known[group[0]] = (_bytes(_queries_table(whole, self._columns)) - self._empty
                                     + _bytes(_drill(whole, self._columns, self._run.manifest)) + _SLACK)
        return self._known[group[0]]

    def fit(self, groups: Sequence[Group], room: int) -> bool:
        """Whether all of ``groups`` fit in ``room`` bytes (measured until they do not)."""
        for group in groups:
            room -= self(group)
            if room < 0:
                return False
        return True


def _bytes(text: str) -> int:
    return len(text.encode("utf-8"))


def _chunks(groups: Sequence[Group]) -> list[range]:
    """The queries of each page, in the run's order: ``PAGE_QUERIES`` at most, and no more than ``PAGE_BYTES`` of
    their results (one query at least)."""
    chunks: list[range] = []
    start, size = 0, 0
    for index, (_, _, runs, cross) in enumerate(groups):
        bytes_ = sum(item["_at"][1] for item in (*runs, cross) if isinstance(item, dict) and "_at" in item)
        if index > start and (index - start == PAGE_QUERIES or size + bytes_ > PAGE_BYTES):
            chunks.append(range(start, index))
            start, size = index, 0
        size += bytes_
    if groups:
        chunks.append(range(start, len(groups)))
    return chunks


PAGE_NAME = re.compile(r"page-[0-9]{4,}\.html")  # every name _page_name makes, and nothing else


def _page_name(number: int) -> str:
    return f"page-{number:04d}.html"


def _every_query(groups: Sequence[Group], chunks: Sequence[range], shown: int) -> str:
    items = []
    for number, chunk in enumerate(chunks, start=1):
        part = groups[chunk.start:chunk.stop]
        failed = sum(missing_counts([*runs, cross])[FAILED] for _, _, runs, cross in part)
        items.append(f'<li><a href="{PAGES_DIR}/{_page_name(number)}">queries {chunk.start + 1}–{chunk.stop}</a> '
                     f'<span class="muted">{esc(part[0][0])} … '
                     f'{esc(part[-1][0])}{f" · {failed} failed values" if failed else ""}</span></li>')
    return (f'<h2>Every query</h2><p class="legend" id="every-query">This run has {len(groups)} queries: below are '
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


def _write_pages(folder: Path, groups: Sequence[Group], chunks: Sequence[range], columns: Sequence[str],
                 run: RunData, aside: _SetAside, report: str) -> None:
    clear_pages(folder)
    folder.mkdir(parents=True, exist_ok=True)
    banner = ('<p class="banner">The judge was simulated: these numbers test the pipeline, they are not real '
              'judgments.</p>') if run.simulated else ""
    for number, chunk in enumerate(chunks, start=1):
        part = _whole(groups[chunk.start:chunk.stop], aside)
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
        run = _load(directory, aside)
        groups = _grouped(run.outputs, run.queries)
        columns = _columns(run)
        folder = path.parent / PAGES_DIR
        size = _Sizes(run, columns, aside)
        if len(groups) <= INLINE_QUERIES:
            room = REPORT_BYTES - _bytes(_render(run, [], columns))
            if size.fit(groups, room):
                clear_pages(folder)
                atomic_write_text(path, _render(run, _whole(groups, aside), columns))
                return path
        chunks = _chunks(groups)
        _write_pages(folder, groups, chunks, columns, run, aside, path.name)
        room = REPORT_BYTES - _bytes(_render(run, [], columns, _every_query(groups, chunks, INLINE_QUERIES)))
        chosen = _chosen(groups, columns, size, room)
        atomic_write_text(path, _render(run, _whole(chosen, aside), columns, _every_query(groups, chunks, len(chosen))))
        return path
    finally:
        aside.close()


def write_report(output_dir: Path, path: Path | None = None) -> Path:
    """Write ``report.html`` (or ``path``) for ``output_dir`` atomically and return its path. It is at most
    ``REPORT_BYTES``: up to ``INLINE_QUERIES`` queries that fit, every query is on the page in full;
    beyond, the worst and a sample that fit are, and every query is on the pages of ``report-queries/`` beside it.
    results.json is read as a stream."""
    path = Path(output_dir) / "report.html" if path is None else Path(path)
    return write_paged(Path(output_dir), path)
