"""A run of more than ``INLINE_QUERIES`` queries through the Python API: ``Results`` holds, saves and reports the
report's pages (``report-queries/``) exactly as the CLI writes them, and every link of the report resolves."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pandas", reason="pandas (the 'api' extra) is not installed")

from open_rag_eval import Results, evaluate  # noqa: E402
from open_rag_eval.report import paged  # noqa: E402
from open_rag_eval.run.generation import PAGES_DIR  # noqa: E402
from tests.report_links import N_LARGE as N  # noqa: E402
from tests.report_links import broken_links, large_items, relative_links, tree  # noqa: E402

JUDGE = {"simulated": {"seed": 1}, "cache": False}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Results, Path]:
    """The same data through the CLI (a folder) and through ``evaluate`` (its Results and output_dir)."""
    base = tmp_path_factory.mktemp("pages")
    (base / "data.jsonl").write_text("".join(json.dumps(item) + "\n" for item in large_items()), encoding="utf-8")
    (base / "cli.yaml").write_text("input: data.jsonl\noutput_dir: cli\njudge:\n  simulated: {seed: 1}\n"
                                   "  cache: false\nevaluators:\n  - type: trec\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", "cli.yaml"],
                          capture_output=True, text=True, cwd=base)
    assert done.returncode == 0, done.stderr
    results = evaluate(large_items(), judge=JUDGE, output_dir=base / "api")
    return base / "cli", results, base / "api"


def test_results_hold_and_save_the_pages_the_cli_writes(runs: tuple[Path, Results, Path], tmp_path: Path) -> None:
    cli, results, api = runs
    written = tree(cli)
    assert any(name.startswith(f"{PAGES_DIR}/page-") for name in written), written  # the run is large
    assert set(results.files) == written == tree(api)
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "notes.txt").write_text("mine", encoding="utf-8")
    saved = results.save(tmp_path / "saved")
    assert tree(saved) == written | {"notes.txt"}
    for name in written:
        if name.endswith(".html"):  # the report and its pages, byte for byte (the csv/json carry timings)
            assert (saved / name).read_bytes() == (api / name).read_bytes(), name
    assert set(Results.from_folder(saved).files) == written
    assert broken_links(saved / "report.html") == []
    assert len(relative_links(saved / "report.html")) >= -(-N // paged.PAGE_QUERIES)


def test_saving_a_small_run_over_a_large_one_leaves_no_stale_pages(runs: tuple[Path, Results, Path],
                                                                   tmp_path: Path) -> None:
    _, large, _ = runs
    small = Results({name: text for name, text in large.files.items() if not name.startswith(PAGES_DIR)})
    folder = large.save(tmp_path / "run")
    assert (folder / PAGES_DIR).is_dir()
    small.save(folder)
    assert not (folder / PAGES_DIR).exists()


def test_report_writes_the_pages_beside_it_linking_back_to_its_name(runs: tuple[Path, Results, Path],
                                                                     tmp_path: Path) -> None:
    _, results, _ = runs
    page = results.report(tmp_path / "out" / "mine.html")
    assert broken_links(page) == []
    pages = sorted((page.parent / PAGES_DIR).glob("page-*.html"))
    assert len(pages) == -(-N // paged.PAGE_QUERIES)
    assert 'href="../mine.html"' in pages[0].read_text(encoding="utf-8")
    assert all(re.search(r'href="\.\./report\.html"', p.read_text(encoding="utf-8")) is None for p in pages)


def test_a_file_name_outside_the_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a file of a run"):
        Results({"report-queries/../../escape.html": "x"}).save(tmp_path / "run")
    assert not (tmp_path / "escape.html").exists()
