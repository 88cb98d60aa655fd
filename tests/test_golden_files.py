"""TREC qrels and run readers: good files and bad ones (errors name file, line and field)."""

from __future__ import annotations

from pathlib import Path

import pytest

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.trec_files import RunEntry, read_qrels, read_run

DATA = Path(__file__).parent / "data" / "bad"
CONFIG_DATA = Path(__file__).parent.parent / "configs" / "data"

# malformed TREC files in tests/data/bad/: (file, line, field, problem); the CLI fault tests reuse them
BAD_QRELS = [
    ("qrels_missing_field.txt", 1, "rel", "expected 4 fields"),
    ("qrels_extra_field.txt", 1, "rel", "found 5"),
    ("qrels_bad_grade.txt", 2, "rel", "'high' is not an integer"),
    ("qrels_duplicate_doc.txt", 4, "docid", "judged twice for query 'q1'"),
    ("qrels_empty.txt", None, "", "no entries"),
]
BAD_RUNS = [
    ("run_missing_field.txt", 1, "tag", "expected 6 fields"),
    ("run_bad_score.txt", 2, "score", "'abc' is not a number"),
    ("run_nan_score.txt", 1, "score", "not a finite number"),
    ("run_bad_rank.txt", 1, "rank", "'first' is not an integer"),
    ("run_duplicate_doc.txt", 3, "docid", "retrieved twice for query 'q1'"),
    ("run_not_utf8.txt", 2, "", "not valid UTF-8"),
]


def test_read_qrels() -> None:
    qrels = read_qrels(CONFIG_DATA / "golden_trec_qrels.txt")
    assert qrels == {"q1": {"d1": 1, "d2": 2, "d3": 0, "d4": 1}, "q2": {"dA": 1, "dB": 0}, "q3": {"x1": 0}}


def test_read_run_keeps_file_order() -> None:
    run = read_run(CONFIG_DATA / "golden_trec_run.txt")
    assert list(run) == ["q1", "q2", "q3"]
    assert run["q2"] == [RunEntry("dA", 1, 1.0), RunEntry("dB", 2, 1.0)]


def test_whitespace_tabs_bom_and_negative_grades(tmp_path: Path) -> None:
    path = tmp_path / "qrels"
    path.write_bytes(b"\xef\xbb\xbfq1\t0\td1\t-1\r\n\r\nq1 0  d2 3\n")
    assert read_qrels(path) == {"q1": {"d1": -1, "d2": 3}}


@pytest.mark.parametrize(("name", "line", "field", "problem"), BAD_QRELS + BAD_RUNS)
def test_a_bad_qrels_or_run_file_names_file_line_and_field(name: str, line: int | None, field: str,
                                                           problem: str) -> None:
    reader = read_qrels if name.startswith("qrels_") else read_run
    with pytest.raises(InputError) as caught:
        reader(DATA / name)
    error = caught.value
    assert error.file.endswith(name) and error.line == line and error.field == field
    assert problem in str(error)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        read_run(tmp_path / "absent.txt")
