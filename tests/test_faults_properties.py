"""Property tests: the judge-reply parsers and the CSV/JSONL citation reading never crash on arbitrary text.

Answer segmentation and ``find_citations`` on arbitrary text are covered in test_segment.py; here the parsers of
judge replies (UMBRELA, nugget lists and labels, support, no-answer, reasoning blocks) and the whole input path
(a CSV or JSONL cell holding arbitrary answer text and passage ids) get the same treatment.
"""

from __future__ import annotations

import csv
import io
import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from open_rag_eval.cli import error_line
from open_rag_eval.core.errors import InputError
from open_rag_eval.judge.client import strip_reasoning as strip_client_reasoning
from open_rag_eval.core.parsing import (parse_labels, parse_list, parse_no_answer, parse_support, parse_umbrela,
                                   strip_reasoning)
from open_rag_eval.core.segment import resolve_citations

# text that looks like judge output more often than uniform characters would
JUDGE_WORDS = st.sampled_from(["##final score:", "final score is", '"o":', "O: ", "score is", "relevance category",
                               "Full Support", "partial support", "NO SUPPORT", "yes", "No.", "`yes`", "[", "]",
                               "'", '"', ",", "```python", "```", "<think>", "</think>", "\n", " ", "3", "0", "7",
                               "vital", "okay", "\\", "\x00", "\u2028", "é", "💥"])
JUDGISH = st.lists(JUDGE_WORDS | st.text(max_size=5), max_size=40).map("".join)
ANY_TEXT = st.text(max_size=400) | JUDGISH
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(ANY_TEXT, st.sampled_from(["trec2024", "head"]))
@example("##final score: 3", "trec2024")
@example("o" * 5000 + "4", "trec2024")
def test_umbrela_parser_total(text: str, profile: str) -> None:
    grade, valid = parse_umbrela(text, profile)
    assert grade in (0, 1, 2, 3) and isinstance(valid, bool)
    if not valid:
        assert grade == 0


@FAST
@given(ANY_TEXT)
@example("[" * 10000)
@example("(" * 300 + ")" * 300)
@example("9" * 100000)
@example("['a', 'b'\x00]")
@example("```python\n['a']\n```")
@example("[1e999999, 'x']")
def test_nugget_list_parser_total(text: str) -> None:
    parsed = parse_list(text)
    assert parsed is None or (isinstance(parsed, list) and all(isinstance(item, str) for item in parsed))


@FAST
@given(st.lists(st.text(st.characters(blacklist_characters="`"), max_size=60), max_size=20))
def test_nugget_list_round_trip(nuggets: list[str]) -> None:
    """Any list of strings the judge writes comes back (fences anywhere are dropped, as the reference does)."""
    assert parse_list(repr(nuggets)) == nuggets
    assert parse_list(f"```python\n{nuggets!r}\n```") == nuggets


@FAST
@given(ANY_TEXT, st.integers(0, 12))
def test_label_parser_total(text: str, expected: int) -> None:
    labels = parse_labels(text, expected)
    assert labels is None or (len(labels) == expected and all(label == label.lower() for label in labels))


@FAST
@given(ANY_TEXT)
def test_support_and_no_answer_parsers_total(text: str) -> None:
    assert parse_support(text) in ("FS", "PS", "NS", None)
    assert parse_no_answer(text) in ("yes", "no", None)


@FAST
@given(ANY_TEXT)
@example("<think>" * 1000)
@example("</think>" + "<THINK>x" * 100)
def test_reasoning_strippers_total(text: str) -> None:
    assert len(strip_reasoning(text)) <= len(text)
    assert len(strip_client_reasoning(text)) <= len(text)


@FAST
@given(st.lists(ANY_TEXT, max_size=6), st.lists(st.text(max_size=8), max_size=6))
@example(["\u00b9"], ["a"])  # '¹'.isdigit() is True, int('¹') raises
@example(["\u0663", "\uff12"], ["a", "b", "c"])
def test_citation_resolution_total(citations: list[str], passage_ids: list[str]) -> None:
    resolved, unknown = resolve_citations(citations, passage_ids)
    assert len(resolved) <= len(citations) and len(unknown) <= len(citations)


def _read(name: str, data: bytes) -> None:
    from open_rag_eval.inputs import read_outputs

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            outputs = read_outputs(path)
        except InputError as error:
            assert str(error).startswith(str(path)) and len(error_line(error).splitlines()) == 1
            return
        for output in outputs:
            for part in output.answer:
                assert all(isinstance(c, str) for c in part.citations)


IDS = st.sampled_from(["1", "[1]", "2", "[2]", "d1", " 3 ", "[ ]", "", "[[4]]", "1,2", "x\ny"]) | st.text(max_size=6)


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT, st.lists(st.tuples(IDS, st.text(max_size=80)), min_size=1, max_size=4), ANY_TEXT)
def test_csv_cells_with_arbitrary_answers_and_ids(answer: str, passages: list[tuple[str, str]], query: str) -> None:
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["query_id", "query", "query_run", "passage_id", "passage", "generated_answer"])
    for i, (pid, text) in enumerate(passages):
        writer.writerow(["q1", query, 1, pid, text, answer if i == 0 else ""])
    _read("answers.csv", buffer.getvalue().encode("utf-8", "surrogatepass"))


@settings(max_examples=200, deadline=None)
@given(ANY_TEXT, st.lists(st.tuples(IDS, st.text(max_size=80)), max_size=4),
       st.lists(st.text(max_size=8) | st.integers(-3, 9), max_size=4))
def test_jsonl_lines_with_arbitrary_answers_and_citations(answer: str, passages: list[tuple[str, str]],
                                                          citations: list[object]) -> None:
    line = {"query_id": "q1", "query": "why?", "passages": [{"id": pid, "text": text} for pid, text in passages],
            "answer": [{"text": answer, "citations": citations}]}
    plain = dict(line, answer=answer)
    data = (json.dumps(line) + "\n" + json.dumps(dict(plain, run=2)) + "\n").encode("utf-8", "surrogatepass")
    _read("outputs.jsonl", data)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=300))
def test_arbitrary_bytes_as_csv_or_jsonl(data: bytes) -> None:
    _read("answers.csv", b"query_id,query,passage_id,passage,generated_answer\n" + data)
    _read("outputs.jsonl", data)
