"""The report of a large run: report.html keeps the weakest and a sample; every query is on a page beside it.

The fixture run has 4 queries; the page sizes are lowered so that it is "large" (2 inline, 1 weakest, 3 a page).
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.core.errors import InputError
from open_rag_eval.report import paged, render_report, write_report
from open_rag_eval.store.json_items import read_items


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paged, "INLINE_QUERIES", 2)
    monkeypatch.setattr(paged, "WORST_QUERIES", 1)
    monkeypatch.setattr(paged, "PAGE_QUERIES", 3)


def test_a_small_run_is_one_page_equal_to_the_whole_render(results: Path) -> None:
    page = write_report(results).read_text(encoding="utf-8")
    assert page == render_report(results)
    assert not (results / paged.PAGES_DIR).exists() and 'id="every-query"' not in page


def test_a_large_run_pages_every_query_and_keeps_the_weakest_inline(results: Path, small_pages: None) -> None:
    data = json.loads((results / "results.json").read_text(encoding="utf-8"))
    queries = list(dict.fromkeys(o["query_id"] for o in data["outputs"]))
    page = write_report(results).read_text(encoding="utf-8")
    first, second = sorted((results / paged.PAGES_DIR).glob("page-*.html"))
    assert [first.name, second.name] == ["page-0001.html", "page-0002.html"]
    pages = [p.read_text(encoding="utf-8") for p in (first, second)]
    on_pages = [qid for p in pages for qid in re.findall(r'data-key="id" data-v="([^"]*)"', p)]
    assert on_pages == queries  # every query once, in the run's order
    inline = re.findall(r'data-key="id" data-v="([^"]*)"', page)
    assert len(inline) == 2 and set(inline) <= set(queries)
    assert 'href="report-queries/page-0001.html"' in page and 'href="report-queries/page-0002.html"' in page
    assert f"This run has {len(queries)} queries" in page
    assert 'href="../report.html"' in pages[0] and 'href="page-0002.html" rel="next"' in pages[0]
    assert 'href="page-0001.html" rel="prev"' in pages[1]
    for text in (page, *pages):  # each file stands alone: our one script, nothing from a network
        assert text.count("<script") == 1 and not re.search(r"""(src|href)=["']?(https?:)?//""", text)
    # the summary sections still count every output, not only those shown
    assert "5 / 6 outputs fully scored" in page


def test_the_weakest_query_on_the_first_column_is_inline(results: Path, small_pages: None,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paged, "INLINE_QUERIES", 1)  # the weakest alone: no sample beside it
    data = json.loads((results / "results.json").read_text(encoding="utf-8"))
    page = write_report(results).read_text(encoding="utf-8")
    column = re.search(r'<th class="num" data-sort="([^"]+)" title=', page)
    assert column is not None
    metric = column.group(1)
    means: dict[str, list[float]] = {}
    for output in data["outputs"]:
        value = output["scores"].get(metric)
        if value is not None:
            means.setdefault(output["query_id"], []).append(value)
    weakest = min(means, key=lambda q: sum(means[q]) / len(means[q]))
    assert re.findall(r'data-key="id" data-v="([^"]*)"', page) == [weakest]


def test_a_smaller_rerun_removes_the_old_pages_only(results: Path, small_pages: None,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    write_report(results)
    folder = results / paged.PAGES_DIR
    (folder / "notes.txt").write_text("mine", encoding="utf-8")
    monkeypatch.setattr(paged, "INLINE_QUERIES", 100)
    write_report(results)
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]


def test_the_report_command_writes_pages_beside_the_output_file(results: Path, tmp_path: Path,
                                                                small_pages: None) -> None:
    target = tmp_path / "elsewhere" / "run.html"
    target.parent.mkdir()
    assert main(["-q", "report", str(results), "-o", str(target)]) == 0
    assert target.is_file() and (target.parent / paged.PAGES_DIR / "page-0001.html").is_file()


def test_the_stream_reader_gives_every_item_and_the_other_members(results: Path) -> None:
    data = json.loads((results / "results.json").read_text(encoding="utf-8"))
    seen: list[tuple[str, dict]] = []
    members = read_items(results / "results.json", lambda section, item: seen.append((section, item)))
    assert [item for section, item in seen if section == "outputs"] == data["outputs"]
    assert [item for section, item in seen if section == "queries"] == data["queries"]
    assert members == {k: v for k, v in data.items() if k not in ("outputs", "queries")}


@pytest.mark.parametrize("text, problem", [
    ('{"outputs": [{"scores": {"a": NaN}}]}', "not a finite number"),
    ('{"outputs": [{"a": 1}', "cannot read JSON"),
    ('{"outputs": [1]}', "not an object"),
    ("[1, 2]", "expected a JSON object"),
    ('{"a": 1} {"b": 2}', "cannot read JSON"),
])
def test_the_stream_reader_refuses_broken_files_naming_them(tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "results.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=problem) as error:
        read_items(path, lambda section, item: None)
    assert "results.json" in str(error.value)


def test_the_stream_reader_reads_items_across_its_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval.store import json_items as stream

    monkeypatch.setattr(stream, "_CHUNK", 7)
    outputs = [{"query_id": f"q{i}", "scores": {"m": i * 1.25, "n": 10**12 + i}, "text": "ä" * i} for i in range(30)]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"simulated": True, "outputs": outputs, "queries": [], "summary": [1.5]}, indent=2),
                    encoding="utf-8")
    seen: list[dict] = []
    assert read_items(path, lambda section, item: seen.append(item)) == {"simulated": True, "summary": [1.5]}
    assert seen == outputs


_FILLER = "Tides & 'moons' <rise> \"fall\" "


def _large_run(folder: Path, queries: int, runs: int, passages: int, passage_chars: int,
               statements: int, statement_chars: int) -> Path:
    """A results folder written directly (no judge): every passage and answer statement long, with characters that
    grow when escaped (``'`` becomes six bytes), grades, citation judgments and scores on every output."""
    filler = _FILLER * (passage_chars // len(_FILLER) + 1)
    outputs = []
    for q in range(queries):
        for run in range(1, runs + 1):
            ids = [f"q{q}d{p}" for p in range(passages)]
            said = [{"text": f"q{q} r{run} s{s} " + filler[:statement_chars], "citations": [ids[s % passages]]}
                    for s in range(statements)]
            outputs.append({
                "query_id": f"q{q:04d}", "query": f"What about item {q}?", "run": run,
                "passages": [{"id": pid, "text": f"{pid}: " + filler[:passage_chars]} for pid in ids],
                "answer": said, "answer_text": " ".join(s["text"] for s in said),
                "scores": {"umbrela.mean": (q * 7 + run) % 4 / 1.0, "citation.f1": (q % 5) / 4},
                "errors": {},
                "details": {"umbrela": {"grades": [{"passage_id": pid, "grade": (q + i) % 4, "status": "ok"}
                                                   for i, pid in enumerate(ids)]},
                            "citation": {"statements": [{**s, "judgments": [{"passage_id": s["citations"][0],
                                                                              "label": "FS", "status": "ok"}]}
                                                        for s in said]}}})
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"simulated": True, "outputs": outputs, "queries": [],
                                                     "summary": []}), encoding="utf-8")
    (folder / "manifest.json").write_text(json.dumps({"simulated": True, "n_outputs": len(outputs)}), encoding="utf-8")
    return folder


def test_report_html_stays_under_15_mb_with_long_passages_and_answers(tmp_path: Path) -> None:
    """200 queries x 5 runs x 10 passages of 2 KB and 5 long statements: 200 queries used to be one page of them
    all (~30 MB); now report.html keeps what fits and every query is on a page, its text in full."""
    from tests.report_links import broken_links

    results = _large_run(tmp_path / "large", queries=paged.INLINE_QUERIES, runs=5, passages=10, passage_chars=2000,
                         statements=5, statement_chars=1000)
    report = write_report(results)
    assert report.stat().st_size <= paged.REPORT_BYTES <= 15_000_000
    text = report.read_text(encoding="utf-8")
    assert broken_links(report) == []
    pages = sorted((results / paged.PAGES_DIR).glob("page-*.html"))
    assert len(pages) == len(re.findall(r'href="report-queries/page-\d+\.html"', text)) > 1
    on_pages: list[str] = []
    for page in pages:
        body = page.read_text(encoding="utf-8")
        on_pages += re.findall(r'data-key="id" data-v="([^"]*)"', body)
        assert "q0001d9: Tides &amp; &#x27;moons&#x27; &lt;rise&gt;" in body or "q0001d9" not in body
    assert on_pages == [f"q{q:04d}" for q in range(paged.INLINE_QUERIES)]  # every query once, in order
    inline = re.findall(r'data-key="id" data-v="([^"]*)"', text)
    assert 0 < len(inline) < paged.INLINE_QUERIES
    last = f"q{paged.INLINE_QUERIES - 1}d9: " + (_FILLER * 100)[:2000]  # the last passage's full text, on its page
    assert html.escape(last) in pages[-1].read_text(encoding="utf-8")


def test_report_html_is_within_any_byte_budget_that_holds_its_summary(results: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The measured bound is exact: for budgets from the bare summary up to the whole page, report.html never
    exceeds it, and holds more queries in full as it grows (a query too large is on its page only)."""
    whole = len(render_report(results).encode("utf-8"))
    monkeypatch.setattr(paged, "REPORT_BYTES", 10)
    write_report(results)
    bare = (results / "report.html").stat().st_size  # no query fits: the summary and the list of pages
    assert re.findall(r'data-key="id" data-v="([^"]*)"', (results / "report.html").read_text()) == []
    shown = []
    for budget in range(bare + 10, whole + 4000, max(1, (whole + 4000 - bare) // 12)):  # 10: the legend's number
        monkeypatch.setattr(paged, "REPORT_BYTES", budget)
        page = write_report(results).read_text(encoding="utf-8")
        assert len(page.encode("utf-8")) <= budget
        shown.append(len(re.findall(r'data-key="id" data-v="([^"]*)"', page)))
    assert shown == sorted(shown) and shown[-1] == 4 and not (results / paged.PAGES_DIR).exists()


def test_a_page_holds_about_page_bytes_of_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = _large_run(tmp_path / "run", queries=12, runs=2, passages=3, passage_chars=500, statements=2,
                         statement_chars=200)
    one_query = len(json.dumps(json.loads((results / "results.json").read_text())["outputs"][:2]))
    monkeypatch.setattr(paged, "PAGE_BYTES", 3 * one_query)
    monkeypatch.setattr(paged, "REPORT_BYTES", 10)  # nothing inline: pages only
    write_report(results)
    pages = sorted((results / paged.PAGES_DIR).glob("page-*.html"))
    counts = [len(re.findall(r'data-key="id" data-v="', p.read_text(encoding="utf-8"))) for p in pages]
    assert sum(counts) == 12 and max(counts) <= 3 and len(pages) >= 4
