"""The report of a large run: report.html keeps the weakest and a sample; every query is on a page beside it.

The fixture run has 4 queries; the page sizes are lowered so that it is "large" (2 inline, 1 weakest, 3 a page).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.errors import InputError
from open_rag_eval.report import paged, render_report, write_report
from open_rag_eval.report.stream import read_items


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
    from open_rag_eval.report import stream

    monkeypatch.setattr(stream, "_CHUNK", 7)
    outputs = [{"query_id": f"q{i}", "scores": {"m": i * 1.25, "n": 10**12 + i}, "text": "ä" * i} for i in range(30)]
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"simulated": True, "outputs": outputs, "queries": [], "summary": [1.5]}, indent=2),
                    encoding="utf-8")
    seen: list[dict] = []
    assert read_items(path, lambda section, item: seen.append(item)) == {"simulated": True, "summary": [1.5]}
    assert seen == outputs


def test_inline_detail_is_bounded_by_outputs_too(results: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Few queries with many runs still page: report.html holds at most INLINE_OUTPUTS outputs (one query at least)."""
    data = json.loads((results / "results.json").read_text(encoding="utf-8"))
    runs = {}
    for output in data["outputs"]:
        runs[output["query_id"]] = runs.get(output["query_id"], 0) + 1
    monkeypatch.setattr(paged, "INLINE_OUTPUTS", max(runs.values()))
    page = write_report(results).read_text(encoding="utf-8")
    inline = re.findall(r'data-key="id" data-v="([^"]*)"', page)
    assert 1 <= len(inline) < len(runs) and sum(runs[q] for q in inline) <= max(runs.values())
    assert (results / paged.PAGES_DIR / "page-0001.html").is_file()
