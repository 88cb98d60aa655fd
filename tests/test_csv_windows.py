"""A CSV input streamed window by window: the results of the same outputs read whole or given as JSONL, byte for
byte; the errors of the whole-file reader, before anything is asked or written; a bad row in a late window fails
the run (exit 3) and publishes nothing."""

from __future__ import annotations

import csv
import random
import re
import io
import json
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.config import load_config
from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs import output_to_json, read_outputs
from open_rag_eval.inputs.csv_layout import read_csv_outputs
from open_rag_eval.inputs.csv_stream import csv_query_groups, csv_query_sizes
from open_rag_eval.run import evaluation, pipeline, source, start
from open_rag_eval.run.spill import Spill
from tests.test_run_windows import write_config

FILES = ("results.csv", "results.json", "summary.csv", "outputs.jsonl")
WORDS = "solar wind grid battery storage carbon price market coal hydro power demand supply heat pump".split()
HEADER = ["query_id", "query", "query_run", "passage_id", "passage", "generated_answer", "relevant_ids",
          "expected_keywords", "latency_ms"]


def _rows(queries: int = 9) -> list[list[str]]:
    """``queries`` queries of 2 or 3 runs, two passages a run (one row each, the answer in the first), labels."""
    rows = []
    for q in range(queries):
        words = WORDS[q % 11:q % 11 + 4]
        for run in range(1, 3 + q % 2):
            answer = f"{words[0].capitalize()} meets {words[run % 4]} [1]. Also {words[2]} [2]."
            for i in (1, 2):
                rows.append([f"q{q}", f"What about {words[0]} and {words[1]}?", str(run), str(i),
                             f"{' '.join(words)} text {i} of query {q},\nrun {run}.", answer if i == 1 else "",
                             "1" if i == 1 else "", ";".join(words[:2]) if i == 1 else "", f"{10 * run + q}"])
    return rows


def _csv(rows: list[list[str]]) -> str:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows([HEADER, *rows])
    return buffer.getvalue()


def _run(config: Path, window: int, monkeypatch: pytest.MonkeyPatch, whole: bool = False
         ) -> tuple[dict[str, bytes], int]:
    """The run's files and its number of windows; ``whole``: the outputs read at once, as before streaming."""
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", window)
    added: list[int] = []
    real_add = Spill.add
    monkeypatch.setattr(Spill, "add", lambda self, outputs, parts: (added.append(len(outputs)),
                                                                      real_add(self, outputs, parts))[1])
    loaded = load_config(config)
    given = read_outputs(loaded.resolve_path(loaded.config.input)) if whole else None
    report = pipeline.run(loaded, outputs=given)
    return {name: (report.output_dir / name).read_bytes() for name in FILES}, len(added)


def test_a_csv_in_windows_gives_the_bytes_of_the_csv_read_whole_and_of_the_same_outputs_as_jsonl(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "data.csv"
    data.write_bytes(b"\xef\xbb\xbf" + _csv(_rows()).encode())
    config = write_config(tmp_path, data, "data")
    windowed, n_windowed = _run(config, 5, monkeypatch)
    assert isinstance(pipeline.open_source(load_config(config)), source.CsvSource)
    whole, n_whole = _run(config, 5, monkeypatch, whole=True)  # a ListSource: today's read-whole run
    assert (n_windowed, n_whole) == (5, 5)  # q0 q1 | q2 q3 | ...: whole queries, at most 5 outputs
    one, n_one = _run(config, 10_000, monkeypatch)
    assert n_one == 1
    as_jsonl = tmp_path / "data.jsonl"
    as_jsonl.write_text("".join(json.dumps(output_to_json(o)) + "\n" for o in read_csv_outputs(data)), "utf-8")
    jsonl, _ = _run(write_config(tmp_path, as_jsonl, "data"), 5, monkeypatch)
    for name in FILES:
        assert windowed[name] == whole[name] == one[name], name
        if name != "results.json":
            assert windowed[name] == jsonl[name], name
    document = json.loads(windowed["results.json"])
    sources = [entry.pop("source") for entry in document["outputs"]]  # file:line of each output's first row
    from_jsonl = json.loads(jsonl["results.json"])
    assert [entry.pop("source") for entry in from_jsonl["outputs"]] == [f"{as_jsonl}:{n}" for n in range(1, 23)]
    assert document == from_jsonl and sources[:3] == [f"{data}:{line}" for line in (2, 6, 10)]
    assert len(document["outputs"]) == 22 and document["outputs"][0]["scores"]["golden.recall@1"] == 1.0


def test_the_streamed_reader_reads_the_outputs_and_shape_of_the_whole_file_reader(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(_csv(_rows()), encoding="utf-8", newline="")
    groups = list(csv_query_groups(path))
    assert [o for group in groups for o in group] == read_csv_outputs(path)
    assert list(csv_query_sizes(path)) == [(f"q{q}", 2 + q % 2, 2 + q % 2) for q in range(9)]
    assert groups[1][2].source == f"{path}:18" and groups[1][2].passages[0].text == "wind grid battery storage " \
        "text 1 of query 1,\nrun 3."  # lines counted across multi-line cells
    contexts = tmp_path / "contexts.csv"
    contexts.write_text('question,answer,contexts,query_id\nWhy?,Because [1].,"[""one""]",a\n'
                        'Why?,Since [1].,"[""two""]",a\nHow?,So [1].,"[""x""]",b\n', encoding="utf-8")
    assert list(csv_query_sizes(contexts)) == [("a", 2, 2), ("b", 1, 1)]
    assert [o for group in csv_query_groups(contexts) for o in group] == read_csv_outputs(contexts)


def _late(tmp_path: Path, name: str, edit: object) -> Path:
    """A CSV of 300 queries (well beyond the reader's first blocks of bytes) with ``edit`` applied near its end."""
    text = _csv(_rows(300))
    path = tmp_path / name
    data = edit(text.encode()) if callable(edit) else text.encode()
    path.write_bytes(data)
    return path


LATE = [
    ("undecodable.csv", lambda b: b[:-40] + b"\xff" + b[-39:], "undecodable bytes (not UTF-8) at byte offset"),
    ("nul.csv", lambda b: b[:-40] + b"\x00" + b[-39:], "binary content (NUL byte at byte offset"),
    ("malformed.csv", lambda b: b[:-30] + b'"x"y' + b[-30:], "malformed CSV"),
    ("unclosed.csv", lambda b: b + b'q300,"Open?,1,1,text,answer,,,1\r\n', "unclosed quote"),
    ("cells.csv", lambda b: b + b"q300,Short?,1\r\n", "row has 3 cells, the header has 9"),
    ("missing_column.csv", lambda b: b.replace(b"passage_id,", b"", 1), "missing column"),
    ("run.csv", lambda b: b + b"q300,Q?,two,1,text,answer,,,1\r\n",
     "field 'query_run': expected a whole number, got 'two'"),
    ("query_id.csv", lambda b: b + b" ,Q?,1,1,text,answer,,,1\r\n", "missing query_id"),
    ("not_contiguous.csv", lambda b: b + b"q299,What about grid and battery?,1,9,text,x,,,1\r\n", "not contiguous"),
]


@pytest.mark.parametrize("name, edit, problem", LATE, ids=[case[0] for case in LATE])
def test_a_problem_late_in_a_csv_fails_when_the_source_opens_with_the_whole_file_reader_s_error(
        tmp_path: Path, name: str, edit: object, problem: str) -> None:
    path = _late(tmp_path, name, edit)
    assert path.stat().st_size > 100_000
    with pytest.raises(InputError) as whole:
        read_csv_outputs(path)
    with pytest.raises(InputError) as opened:
        source.CsvSource(path)  # the shape pass, before anything is asked or written
    assert str(opened.value) == str(whole.value) and problem in str(whole.value)


def test_an_answerless_output_late_in_a_csv_is_read_by_both_readers_and_refused_by_a_metric_reading_it(
        tmp_path: Path) -> None:
    """Whether an output may lack its answer is the evaluators' call (their contracts), not the readers'."""
    from open_rag_eval.evaluators.base import check_answers
    from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
    from open_rag_eval.evaluators.trec import TrecEvaluator

    path = _late(tmp_path, "no_answer.csv", lambda b: b.replace(b"Solar meets wind [1]. Also grid [2].", b"", 2))
    whole = read_csv_outputs(path)
    opened = source.CsvSource(path)
    streamed = [o for window in opened.windows() for o in window]
    assert streamed == whole and opened.n_outputs == len(whole)
    unanswered = [o for o in whole if not o.answer_text]
    assert len(unanswered) == 2 and unanswered[0].source.endswith("no_answer.csv:2")
    check_answers([GoldenEvaluator(GoldenOptions(metrics=["golden"]))], whole)
    with pytest.raises(InputError, match=rf"{unanswered[0].source}: field 'answer': no answer: the trec evaluator's"):
        check_answers([TrecEvaluator()], whole)
    # a missing answer in the first query, a bad number near the end: the reader names the number, its one problem
    bad = _late(tmp_path, "answer_then_latency.csv",
                lambda b: b.replace(b"Solar meets wind [1]. Also grid [2].", b"", 2)
                + b"q300,Q?,1,1,text,answer,,,-5\r\n")
    with pytest.raises(InputError, match="field 'latency_ms': expected a finite number >= 0"):
        read_csv_outputs(bad)


def test_an_undecodable_byte_late_in_a_csv_stops_the_run_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    path = _late(tmp_path, "late.csv", lambda b: b[:-40] + b"\xff" + b[-39:])
    offset = path.read_bytes().index(b"\xff")
    config = write_config(tmp_path, path, "late")
    asked = []
    monkeypatch.setattr(pipeline, "judge_for", lambda *a: asked.append(a))  # never reached
    code = main(["-q", "eval", "--config", str(config)])
    assert code == 3 and asked == []
    with pytest.raises(InputError) as whole:
        read_csv_outputs(path)
    assert [r.getMessage() for r in caplog.records if r.levelno >= 30] == [f"error: {whole.value}"]
    assert f"undecodable bytes (not UTF-8) at byte offset {offset}" in str(whole.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late.csv", "late.yaml"]


def test_a_bad_row_in_a_late_window_fails_the_run_with_exit_3_and_publishes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    rows = _rows()
    data = tmp_path / "late.csv"
    data.write_text(_csv(rows), encoding="utf-8", newline="")
    config = write_config(tmp_path, data, "late")
    before, _ = _run(config, 5, monkeypatch)  # a first run's results, which the failed run must leave as they are
    rows[-1][3] = "1"  # q8's last run (2): its second passage has the id of its first, in the last window
    data.write_text(_csv(rows), encoding="utf-8", newline="")
    opened = source.CsvSource(data)  # the shape pass does not build passages: the source opens
    assert (opened.n_outputs, opened.n_queries) == (22, 9)
    windows_read = []
    real_add = Spill.add
    monkeypatch.setattr(Spill, "add", lambda self, outputs, parts: (windows_read.append(len(outputs)),
                                                                      real_add(self, outputs, parts))[1])
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", 5)
    monkeypatch.setattr(start, "CONTROL_OUTPUTS", 4)  # controls of fewer outputs than the run: its first window
    code = main(["-q", "eval", "--config", str(config)])
    # three windows were evaluated; the fourth (q6 q7) failed as q8's rows were read to see where it ends
    assert code == 3 and windows_read == [5, 5, 5]
    with pytest.raises(InputError) as whole:
        read_csv_outputs(data)
    errors = [r.getMessage() for r in caplog.records if r.levelno >= 30 and r.getMessage().startswith("error")]
    assert errors == [f"error: {whole.value}"]  # (beside it, maybe the live judge-health line of the windows run)
    assert str(whole.value) == f"{data}:88: field 'passage_id': duplicate passage id '1' in query_id 'q8' run 2"
    out = tmp_path / "late-out"
    assert {name: (out / name).read_bytes() for name in FILES} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late-out", "late.csv", "late.yaml"]


def test_a_csv_source_keeps_the_limit_and_reads_a_file_of_interleaved_queries_at_once(tmp_path: Path) -> None:
    path = tmp_path / "a.csv"
    path.write_text(_csv(_rows()), encoding="utf-8", newline="")
    first = source.CsvSource(path, limit=3)
    assert (first.n_queries, first.n_outputs, first.fewest_answered) == (3, 7, 2)
    assert [len(window) for window in first.windows(5)] == [5, 2]  # q0 q1 | q2
    assert [o for window in first.windows(5) for o in window] == source.limit_queries(read_csv_outputs(path), 3)
    interleaved = Path(__file__).parent / "data" / "contexts_layout.csv"  # a query's rows apart: one window
    whole = source.CsvSource(interleaved)
    assert not whole.contiguous and list(whole.windows(1)) == [read_csv_outputs(interleaved)]
    assert [o.run for o in whole.all()] == [1, 1, 2]


def _random_csv(rng: random.Random) -> bytes:
    """A small CSV of outputs drawn at random: line ends, a BOM, blank records, quoted line breaks, rows out of order,
    missing answers or passage ids, now and then a byte that breaks it."""
    rows = []
    for q in range(rng.randint(1, 5)):
        for run in range(1, rng.randint(1, 3) + 1):
            for p in range(1, rng.randint(1, 3) + 1):
                answers = ["An answer [1].", "", "Two\nlines [2].", "x"] if p == 1 else ["", "An answer [1]."]
                answer = rng.choice(answers)
                rows.append([rng.choice([f"q{q}", f" q{q}"]), f"Query {q}?", str(run), rng.choice([str(p), "", str(p)]),
                             rng.choice([f"text {p}", "", 'a "quote"', "new\r\nline"]), answer,
                             rng.choice(["", "1", "1;2", "x:y"])])
    if rng.random() < 0.3:
        rng.shuffle(rows)
    end = rng.choice(["\n", "\r\n", "\r"])
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator=end)
    writer.writerow(["query_id", "query", "query_run", "passage_id", "passage", "generated_answer", "relevant_ids"])
    for row in rows:
        writer.writerow(row)
        if rng.random() < 0.1:
            buffer.write(end)
    data = (b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + buffer.getvalue().encode()
    if rng.random() < 0.15:
        at = rng.randrange(len(data))
        data = data[:at] + rng.choice([b"\xff", b"\x00", b'"', b","]) + data[at:]
    return data


def test_a_csv_source_reads_what_the_whole_file_reader_reads_or_refuses_it_with_its_error(tmp_path: Path) -> None:
    rng = random.Random(7)
    outcomes = set()
    for trial in range(150):
        path = tmp_path / f"t{trial}.csv"
        path.write_bytes(_random_csv(rng))
        try:
            whole, whole_error = read_csv_outputs(path), None
        except InputError as error:
            whole, whole_error = None, str(error)
        try:
            streamed, streamed_error = [o for window in source.CsvSource(path).windows(3) for o in window], None
        except InputError as error:
            streamed, streamed_error = None, str(error)
        assert (streamed, streamed_error) == (whole, whole_error), path.read_bytes()
        problem = re.sub(r"^.*?\.csv(:\d+)?: (field '[^']*': )?", "", whole_error or "read")
        outcomes.add(" ".join(problem.split()[:2]))
    # files read, and refused in many ways (a missing answer is read: whether it is scored is the evaluators' call)
    assert len(outcomes) >= 9 and "read" in outcomes, outcomes
