"""`report` and `compare` over a run of any size: what they keep of its rows is on disk, and their numbers are the
ones the whole run read into memory gives (the values spill in blocks; a report drawn with tiny blocks is the same
page byte for byte)."""

from __future__ import annotations

import csv
import math
import random
from pathlib import Path

import pytest

from open_rag_eval.report import columns, paged, render_report, write_report
from open_rag_eval.report.columns import Columns
from open_rag_eval.report.compare import compare
from open_rag_eval.report.loader import load_results, scan_results


def test_columns_give_back_every_value_in_order_across_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "BLOCK", 3)
    table = Columns()
    try:
        for i in range(10):
            table.add("a", i, i / 4)
            if i % 2:
                table.add("b", -1, float(i))
        assert [v for _, values in table.read("a") for v in values] == [i / 4 for i in range(10)]
        assert [k for keys, _ in table.read("a") for k in keys] == list(range(10))
        column = table.column("b")
        assert len(column) == 5 and list(column) == [1.0, 3.0, 5.0, 7.0, 9.0]
        assert (min(column), max(column), math.fsum(column)) == (1.0, 9.0, 25.0)
        assert table.metrics == ["a", "b"] and not table.column("c") and list(table.read("c")) == []
    finally:
        table.close()


def test_means_by_group_are_fsum_over_count_and_skip_negative_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "BLOCK", 2)
    table = Columns()
    try:
        for key, value in ((2, 0.1), (0, 0.5), (2, 0.2), (-1, 99.0), (2, 0.3), (0, 1.0)):
            table.add("m", key, value)
        means = table.means("m", 4)
        assert means[0] == 0.75 and means[2] == math.fsum([0.1, 0.2, 0.3]) / 3
        assert math.isnan(means[1]) and math.isnan(means[3])
        from array import array

        grouped = table.means("m", 2, array("q", [1, 1, 0]))  # keys 0..2 -> groups: 0 and 1 -> 1, 2 -> 0
        assert grouped[1] == 0.75 and grouped[0] == math.fsum([0.1, 0.2, 0.3]) / 3
    finally:
        table.close()


def test_the_sample_population_without_the_weakest_is_the_list_without_them() -> None:
    taken = [7, 0, 3, 250]
    rest = paged._Without(300, taken)
    listed = [i for i in range(300) if i not in set(taken)]
    assert len(rest) == len(listed) and list(rest) == listed
    for k in (5, 200):  # random.sample reads it as it reads the list: the same picks
        assert random.Random(0).sample(rest, k) == random.Random(0).sample(listed, k)
    with pytest.raises(IndexError):
        rest[len(listed)]


def test_a_paged_report_is_the_same_whatever_the_block_size(results: Path, monkeypatch: pytest.MonkeyPatch,
                                                            tmp_path: Path) -> None:
    monkeypatch.setattr(paged, "INLINE_QUERIES", 2)
    monkeypatch.setattr(paged, "WORST_QUERIES", 1)
    monkeypatch.setattr(paged, "PAGE_QUERIES", 3)
    first = write_report(results, tmp_path / "one.html").read_text(encoding="utf-8")
    pages = sorted(p.read_text(encoding="utf-8") for p in (tmp_path / paged.PAGES_DIR).glob("page-*.html"))
    monkeypatch.setattr(columns, "BLOCK", 1)
    second = write_report(results, tmp_path / "one.html").read_text(encoding="utf-8")
    assert second == first and "5 / 6 outputs fully scored" in first
    assert sorted(p.read_text(encoding="utf-8") for p in (tmp_path / paged.PAGES_DIR).glob("page-*.html")) == pages


def test_a_report_from_results_csv_alone_is_the_whole_render(results: Path) -> None:
    (results / "results.json").unlink()  # scores only, read from results.csv as a stream
    assert write_report(results).read_text(encoding="utf-8") == render_report(results)


def _results_csv(directory: Path, rows: list[tuple[str, str, float | None]]) -> Path:
    directory.mkdir(parents=True)
    with (directory / "results.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query_id", "query", "run", "umbrela.mean", "umbrela.mean.error", "consistency.rougeL"])
        for query, run, value in rows:
            cross = run == "all"
            writer.writerow([query, f"text {query}", run, "" if cross or value is None else value,
                             "judge call failed" if value is None and not cross else "",
                             value if cross else ""])
    return directory


def test_compare_over_values_on_disk_gives_the_in_memory_numbers(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "BLOCK", 2)
    rng = random.Random(3)
    rows_a: list[tuple[str, str, float | None]] = []
    for run in ("1", "2", "3"):  # a query's runs far apart in the file, as a run written run by run
        rows_a += [(f"q{i}", run, None if i == 4 and run == "2" else rng.random()) for i in range(12)]
    rows_a += [(f"q{i}", "all", rng.random()) for i in range(12)]
    rows_b = [(q, run, None if v is None else v * 0.9) for q, run, v in rows_a if q != "q11"]
    rows_b.append(("q99", "1", 0.5))
    a, b = _results_csv(tmp_path / "a", rows_a), _results_csv(tmp_path / "b", rows_b)
    whole = compare(load_results(a), load_results(b), None, seed=2, resamples=300)
    scanned_a, scanned_b = scan_results(a), scan_results(b)
    try:
        assert scanned_a.metrics == ["umbrela.mean", "consistency.rougeL"]
        streamed = compare(scanned_a, scanned_b, None, seed=2, resamples=300)
    finally:
        scanned_a.close()
        scanned_b.close()
    assert streamed.rows == whole.rows and len(whole.rows) == 2
    assert (streamed.only_a, streamed.only_b) == (whole.only_a, whole.only_b) == (["q11"], ["q99"])
    assert whole.rows[0]["n"] == 11 and whole.rows[0]["mean_a"] != whole.rows[0]["mean_b"]


def test_a_job_s_recorder_holds_the_keys_since_its_last_flush_and_purge_still_finds_them(tmp_path: Path) -> None:
    """The service notes every cache key a job uses: memory holds a heartbeat's keys (a set of every key of the
    run grew with it, about 160 bytes a judge call); a key used again after a flush is written again."""
    import asyncio
    import sqlite3

    from open_rag_eval.service.replies import KEYS_FILE, RecordingCache, purge

    class Inner:
        def __init__(self) -> None:
            self.data: dict[str, str] = {}

        async def get(self, key: str) -> str | None:
            return self.data.get(key)

        async def put(self, key: str, entry: str) -> None:
            self.data[key] = entry

    recorder = RecordingCache(Inner())
    job, other = tmp_path / "job", tmp_path / "other"
    job.mkdir()
    other.mkdir()

    async def use(keys: list[str]) -> None:
        for key in keys:
            if await recorder.get(key) is None:
                await recorder.put(key, "reply")

    asyncio.run(use(["k1", "k2", "k1"]))
    recorder.flush(job)
    assert recorder.fresh == set() and not [name for name in vars(recorder) if name not in ("inner", "fresh")]
    asyncio.run(use(["k2", "k3"]))
    recorder.flush(job)
    assert (job / KEYS_FILE).read_text(encoding="utf-8").split() == ["k1", "k2", "k2", "k3"]
    (other / KEYS_FILE).write_text("k3\n", encoding="utf-8")
    cache = tmp_path / "cache.sqlite"
    with sqlite3.connect(cache) as connection:
        connection.execute("CREATE TABLE completions (key TEXT PRIMARY KEY, text TEXT)")
        connection.executemany("INSERT INTO completions VALUES (?, 'reply')", [("k1",), ("k2",), ("k3",), ("k4",)])
    connection.close()
    assert purge(cache, job, [other]) == 2  # k1 and k2: k3 another job used, k4 no job named
    connection = sqlite3.connect(cache)
    assert sorted(r[0] for r in connection.execute("SELECT key FROM completions")) == ["k3", "k4"]
    connection.close()


def test_the_comparison_page_counts_each_query_s_failures_in_full(results: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """`report A B` reads each folder as a stream (an index of its queries, its values by metric on disk); a query's
    failed count is that of its whole items: failed values and an output that failed as a whole."""
    import json
    import re
    import shutil

    from open_rag_eval.report.comparison import render_comparison
    from open_rag_eval.report.drilldown import missing_counts

    monkeypatch.setattr(columns, "BLOCK", 2)
    data = json.loads((results / "results.json").read_text(encoding="utf-8"))
    data["outputs"][0]["error"] = "the system timed out"
    (results / "results.json").write_text(json.dumps(data), encoding="utf-8")
    candidate = tmp_path / "candidate"
    shutil.copytree(results, candidate)
    page = render_comparison([results, candidate], resamples=200)
    expected: dict[str, int] = {}
    for item in [*data["outputs"], *data["queries"]]:
        expected[item["query_id"]] = expected.get(item["query_id"], 0) + 2 * missing_counts([item])["failed"]
    shown = re.findall(r'<tr data-failed="(\d+)"><td data-key="id" data-v="([^"]*)">', page)
    assert {qid: int(n) for n, qid in shown} == expected and len(shown) == len(expected)
    assert expected[data["outputs"][0]["query_id"]] >= 2
    assert f'<td class="num">{len(data["outputs"])}</td>' in page
