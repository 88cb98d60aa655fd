"""One table of input cases run through every door, asserting the same outcome: the CLI (a JSONL and a CSV file),
the Python API inside a running event loop (``aevaluate`` on a list of dicts, ``evaluate`` on a DataFrame called
from a coroutine) and the service over HTTP (JSONL and CSV, inline and uploaded). A case is accepted everywhere, or refused
everywhere with one error naming the same row and field (exit 3, ``InputError``, HTTP 422 ``bad_input``).

Rows count from 0: JSONL line n is row n - 1, a CSV's line n (after its header) row n - 2, ``DataFrame row n`` and
``data[n]`` row n. The CSV door has no case where a cell is not text (every CSV cell is text).
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval import aevaluate, evaluate
from open_rag_eval.cli import main
from open_rag_eval.core.errors import InputError

pd = pytest.importorskip("pandas")

CONFIG = {"evaluators": [{"type": "trec", "metrics": ["citation"]}]}
JUDGE = {"simulated": {"seed": 1}, "cache": False}


def _row(n: int, **changes: Any) -> dict[str, Any]:
    record = {"query_id": f"q{n}", "question": f"What is topic {n}?", "answer": f"Topic {n} is old [1].",
              "contexts": [{"id": "1", "text": f"Topic {n} is old."}, {"id": "2", "text": "Unrelated."}]}
    record.update(changes)
    return {key: value for key, value in record.items() if value is not _DROP}


_DROP = object()


@dataclass(frozen=True)
class Case:
    name: str
    records: list[dict[str, Any]]
    refused: tuple[int, str, str] | None  # (row, field, a fragment of the problem); None: accepted
    csv: bool = True  # expressible as a CSV (every cell is text)
    doors: set[str] = field(default_factory=set)

    def __str__(self) -> str:
        return self.name


CASES = [
    Case("valid", [_row(0), _row(1)], None),
    Case("no answer", [_row(0), _row(1, answer=_DROP)], (1, "answer", "no answer")),
    Case("empty answer", [_row(0, answer="  ")], (0, "answer", "no answer")),
    Case("answer 42", [_row(0), _row(1, answer=42)], (1, "answer", "got a number"), csv=False),
    Case("answer True", [_row(0, answer=True)], (0, "answer", "got a boolean"), csv=False),
    Case("contexts missing (None)", [_row(0), _row(1, contexts=None)], (1, "contexts", "missing contexts")),
    Case("a context None", [_row(0, contexts=[None, "x"])], (0, "contexts[0]", "got null")),
    Case("duplicate passage ids", [_row(0, contexts=[{"id": "1", "text": "a"}, {"id": "1", "text": "b"}])],
         (0, "contexts[1].id", "duplicate passage id '1'")),
    Case("infinite score", [_row(0, contexts=[{"id": "1", "text": "a", "score": math.inf}])],
         (0, "contexts[0].score", "expected a finite number")),
    Case("an empty context", [_row(0), _row(1, contexts=["Topic 1 is old.", ""])],
         (1, "contexts[1]", "missing passage text")),
    Case("a blank context", [_row(0, contexts=[" \n "])], (0, "contexts[0]", "missing passage text")),
    Case("a context object with empty text", [_row(0, contexts=[{"id": "1", "text": ""}])],
         (0, "contexts[0].text", "missing passage text")),
]


# ---------------------------------------------------------------- the case as each door takes it


def _jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r).replace("Infinity", "1e999") + "\n" for r in records)


def _csv(records: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, ["query_id", "question", "answer", "contexts"], lineterminator="\n")
    writer.writeheader()
    for record in records:
        contexts = record.get("contexts")
        writer.writerow({**record, "answer": record.get("answer", ""),
                         "contexts": "" if contexts is None else json.dumps(contexts).replace("Infinity", "1e999")})
    return out.getvalue()


Outcome = tuple[int, str] | tuple[int, str, str]  # (0,) accepted; (row, field, message) refused


def _from_error(problem: str, field: str, row: int) -> tuple[int, str, str]:
    return (row, field, problem)


def _cli(case: Case, tmp_path: Path, suffix: str, caplog: pytest.LogCaptureFixture) -> Outcome:
    text = _jsonl(case.records) if suffix == "jsonl" else _csv(case.records)
    (tmp_path / f"in.{suffix}").write_text(text, encoding="utf-8")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({**CONFIG, "input": f"in.{suffix}", "output_dir": "out", "judge": JUDGE}))
    with caplog.at_level("INFO"):
        code = main(["-q", "eval", "--config", str(config)])
    err = [r.getMessage() for r in caplog.records if r.levelno >= 30]
    if code == 0:
        return (0,)
    assert code == 3 and len(err) == 1, (code, err)
    found = re.match(r".*in\.(?:jsonl|csv):([0-9]+): field '([^']+)': (.*)", err[0])
    assert found, err[0]
    first_row = 1 if suffix == "jsonl" else 2
    return _from_error(found.group(3), found.group(2), int(found.group(1)) - first_row)


def _api_error(error: InputError) -> tuple[int, str, str]:
    found = re.match(r"(?:DataFrame row |data\[)([0-9]+)", error.file)
    assert found, str(error)
    return _from_error(error.problem, error.field, int(found.group(1)))


def _api_list_in_a_loop(case: Case) -> Outcome:
    async def notebook() -> Outcome:
        try:
            await aevaluate(case.records, config=CONFIG, judge=JUDGE)
        except InputError as error:
            return _api_error(error)
        return (0,)

    return asyncio.run(notebook())


def _api_frame_in_a_loop(case: Case) -> Outcome:
    frame = pd.DataFrame(case.records)

    async def notebook() -> Outcome:
        asyncio.get_running_loop()  # evaluate() called where a loop runs (a notebook cell)
        try:
            evaluate(frame, config=CONFIG, judge=JUDGE)
        except InputError as error:
            return _api_error(error)
        return (0,)

    return asyncio.run(notebook())


def _service(case: Case, service: Any, suffix: str, upload: bool = False) -> Outcome:
    text = _jsonl(case.records) if suffix == "jsonl" else _csv(case.records)
    client = service.client()
    if upload:  # read like a job reads it when it arrives: refused there with the same problem, or stored
        stored = client.post("/v1/uploads", params={"format": suffix, "filename": f"in.{suffix}"}, content=text)
        if stored.status_code == 201:
            source: dict[str, Any] = {"upload_id": stored.json()["id"]}
            reply = client.post("/v1/jobs", json={"config": CONFIG, **source, "judge_profile": "sim"})
        else:
            reply = stored
    else:
        reply = client.post("/v1/jobs", json={"config": CONFIG, "inputs": {"format": suffix, "data": text},
                                              "judge_profile": "sim"})
    if reply.status_code in (201, 202):
        return (0,)
    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert problem["code"] == "bad_input", problem
    first_row = 1 if suffix == "jsonl" else 2
    return _from_error(problem["detail"].split(f"'{problem['field']}': ", 1)[1], problem["field"],
                       problem["line"] - first_row)


# ---------------------------------------------------------------- the table


def _expected(case: Case) -> tuple[int, ...] | tuple[int, str]:
    return (0,) if case.refused is None else case.refused[:2]


def _check(case: Case, got: Outcome) -> None:
    assert got[:2] == _expected(case), got
    if case.refused is not None:
        assert case.refused[2] in got[2], got  # type: ignore[misc]
        assert "\n" not in got[2]


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_cli_jsonl(case: Case, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _check(case, _cli(case, tmp_path, "jsonl", caplog))


@pytest.mark.parametrize("case", [c for c in CASES if c.csv], ids=str)
def test_cli_csv(case: Case, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _check(case, _cli(case, tmp_path, "csv", caplog))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_aevaluate_a_list_inside_a_running_loop(case: Case) -> None:
    _check(case, _api_list_in_a_loop(case))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_evaluate_a_dataframe_where_a_loop_runs(case: Case) -> None:
    _check(case, _api_frame_in_a_loop(case))


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("fastapi", reason="the [server] extra is not installed")
    from tests.service_server import Service

    with Service(tmp_path_factory.mktemp("doors"), {"runner": {"jobs": 0}, "limits": {"max_active_jobs": 100}}) \
            as running:  # jobs stay queued: the accepted ones add up
        yield running


@pytest.mark.slow
@pytest.mark.parametrize("upload", [False, True], ids=["inline", "upload"])
@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
@pytest.mark.parametrize("case", CASES, ids=str)
def test_service_over_http(case: Case, suffix: str, upload: bool, service: Any) -> None:
    if suffix == "csv" and not case.csv:
        pytest.skip("every CSV cell is text")
    _check(case, _service(case, service, suffix, upload))


# ---------------------------------------------------------------- files that are not files


def test_a_device_as_input_is_a_clear_error_at_the_cli_and_the_api(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    (tmp_path / "zero.jsonl").symlink_to("/dev/zero")
    (tmp_path / "c.json").write_text(json.dumps({**CONFIG, "input": "zero.jsonl", "output_dir": "out",
                                                  "judge": JUDGE}))
    with caplog.at_level("INFO"):
        assert main(["-q", "eval", "--config", str(tmp_path / "c.json")]) == 3
    err = [r.getMessage() for r in caplog.records if r.levelno >= 30]
    assert len(err) == 1 and err[0].endswith("zero.jsonl: not a regular file (a device, FIFO or socket): give a "
                                             ".csv or .jsonl file"), err
    with pytest.raises(InputError, match="not a regular file"):
        evaluate(tmp_path / "zero.jsonl", config=CONFIG, judge=JUDGE)


def test_an_input_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    from open_rag_eval.inputs.validate import read_input_bytes

    path = tmp_path / "big.jsonl"
    path.write_bytes(b"x" * 101)
    with pytest.raises(InputError, match="the file has 101 bytes, more than the limit of 100: split it"):
        read_input_bytes(path, limit=100)
    assert read_input_bytes(path, limit=101) == b"x" * 101


# ---------------------------------------------------------------- one row per passage (open-rag-eval's CSV layout)

PASSAGE_COLUMNS = ["query_id", "query", "passage_id", "passage", "generated_answer"]


def _passage_rows(n_queries: int = 3, **cells: Any) -> list[dict[str, Any]]:
    """Two passages for each query; ``cells`` maps "row:column" to a changed cell (row counted from 0)."""
    rows = []
    for n in range(n_queries):
        for p in (1, 2):
            rows.append({"query_id": f"q{n}", "query": f"What is topic {n}?", "passage_id": f"p{p}",
                         "passage": f"Topic {n} is old." if p == 1 else "Unrelated.",
                         "generated_answer": f"Topic {n} is old [p1]." if p == 1 else ""})
    for key, value in cells.items():
        row, name = key.split(":")
        rows[int(row)][name] = value
    return rows


def _passage_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, PASSAGE_COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: "" if v is None else v for k, v in row.items()} for row in rows)
    return out.getvalue()


PASSAGE_CASES = [  # (name, rows, (row, field, fragment) or None)
    ("valid", _passage_rows(), None),
    ("empty passage cell", _passage_rows(**{"3:passage": ""}), (3, "passage", "missing passage text")),
    ("blank passage cell", _passage_rows(**{"0:passage": "  "}), (0, "passage", "missing passage text")),
    ("answers all numbers", [dict(r, generated_answer=str(i) if r["passage_id"] == "p1" else "")
                             for i, r in enumerate(_passage_rows())],
     (0, "generated_answer", "every value of this text column is a number (this one '0')")),
    ("passages all numbers", [dict(r, passage=str(i)) for i, r in enumerate(_passage_rows())],
     (0, "passage", "every value of this text column is a number")),
    ("queries all booleans", [dict(r, query="True" if r["query_id"] != "q1" else "false")
                              for r in _passage_rows()], (0, "query", "is a boolean")),
    ("one numeric answer among sentences", _passage_rows(**{"0:generated_answer": "42"}), None),
]


def _passage_cli(rows: list[dict[str, Any]], tmp_path: Path, command: str,
                 caplog: pytest.LogCaptureFixture) -> Outcome:
    (tmp_path / "in.csv").write_text(_passage_csv(rows), encoding="utf-8")
    config = tmp_path / "c.json"
    config.write_text(json.dumps({**CONFIG, "input": "in.csv", "output_dir": "out", "judge": JUDGE}))
    caplog.clear()
    with caplog.at_level("INFO"):
        code = main(["-q", command, "--config", str(config)])
    err = [r.getMessage() for r in caplog.records if r.levelno >= 40]
    if code == 0:
        return (0,)
    assert code == 3 and len(err) == 1, (code, err)
    found = re.match(r".*in\.csv:([0-9]+): field '([^']+)': (.*)", err[0])
    assert found, err[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("results*.csv"))
    return _from_error(found.group(3), found.group(2), int(found.group(1)) - 2)


@pytest.mark.parametrize(("name", "rows", "refused"), PASSAGE_CASES, ids=[c[0] for c in PASSAGE_CASES])
def test_one_row_per_passage_at_every_door(name: str, rows: list[dict[str, Any]], refused: Any, tmp_path: Path,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """The CLI's eval (the file streamed window by window) and validate, ``evaluate`` on the path (read whole) and
    on a DataFrame of the rows (as pandas reads the CSV: missing cells NaN, numeric columns numbers)."""
    case = Case(name, rows, refused)
    _check(case, _passage_cli(rows, tmp_path, "eval", caplog))
    _check(case, _passage_cli(rows, tmp_path, "validate", caplog))
    try:
        evaluate(tmp_path / "in.csv", config=CONFIG, judge=JUDGE)
        got: Outcome = (0,)
    except InputError as error:
        assert error.file.endswith("in.csv") and error.line is not None
        got = _from_error(error.problem, error.field, error.line - 2)
    _check(case, got)
    for frame in (pd.read_csv(io.StringIO(_passage_csv(rows))), pd.read_csv(io.StringIO(_passage_csv(rows)),
                                                                               dtype=str)):
        try:
            evaluate(frame, config=CONFIG, judge=JUDGE)
            got = (0,)
        except InputError as error:
            got = _api_error(error)
        assert got[:2] == _expected(case), (frame.dtypes, got)


@pytest.mark.parametrize("missing", [None, math.nan, "", "   "], ids=["None", "NaN", "empty", "blank"])
def test_a_missing_passage_in_a_dataframe_names_its_row(missing: Any) -> None:
    frame = pd.DataFrame(_passage_rows(**{"5:passage": missing}))
    with pytest.raises(InputError) as caught:
        evaluate(frame, config=CONFIG, judge=JUDGE)
    assert (caught.value.file, caught.value.field) == ("DataFrame row 5", "passage")
    assert caught.value.problem.startswith("missing passage text")


@pytest.mark.slow
@pytest.mark.parametrize("upload", [False, True], ids=["inline", "upload"])
@pytest.mark.parametrize(("name", "rows", "refused"), PASSAGE_CASES, ids=[c[0] for c in PASSAGE_CASES])
def test_one_row_per_passage_at_the_service(name: str, rows: list[dict[str, Any]], refused: Any, upload: bool,
                                            service: Any) -> None:
    text = _passage_csv(rows)
    client = service.client()
    if upload:
        stored = client.post("/v1/uploads", params={"format": "csv", "filename": "in.csv"}, content=text)
        reply = client.post("/v1/jobs", json={"config": CONFIG, "upload_id": stored.json()["id"],
                                              "judge_profile": "sim"}) if stored.status_code == 201 else stored
    else:
        reply = client.post("/v1/jobs", json={"config": CONFIG, "inputs": {"format": "csv", "data": text},
                                              "judge_profile": "sim"})
    if refused is None:
        assert reply.status_code in (201, 202), reply.text
        return
    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert (problem["code"], problem["field"], problem["line"] - 2) == ("bad_input", refused[1], refused[0])
    assert refused[2] in problem["detail"]


@pytest.mark.parametrize("text", ["", "  "], ids=["empty", "blank"])
def test_a_jsonl_passage_with_empty_text_is_refused_at_the_file_and_the_list(text: str, tmp_path: Path,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    record = {"query_id": "q0", "query": "What is x?", "answer": "x is y [p1].",
              "passages": [{"id": "p1", "text": "x is y."}, {"id": "p2", "text": text}]}
    (tmp_path / "in.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps({**CONFIG, "input": "in.jsonl", "output_dir": "out", "judge": JUDGE}))
    with caplog.at_level("INFO"):
        assert main(["-q", "eval", "--config", str(tmp_path / "c.json")]) == 3
    assert any(r.getMessage().endswith("in.jsonl:1: field 'passages[1].text': missing passage text: a passage "
                                       "without text is unknown, not an empty passage, and is not judged")
               for r in caplog.records), [r.getMessage() for r in caplog.records]
    with pytest.raises(InputError) as caught:
        evaluate([record], config=CONFIG, judge=JUDGE)
    assert (caught.value.file, caught.value.field) == ("data[0]", "passages[1].text")


# ---------------------------------------------------------------- a missing column names the layout, the header, the names

MISSING_COLUMNS = [  # (header, field, fragments of the problem)
    (["question", "answer", "context"], "contexts",
     ["missing column (accepted names: contexts, retrieved_contexts) for the layout one row per answer, its passages "
      "listed in a contexts column: query/question/user_input, generated_answer/answer/response, "
      "contexts/retrieved_contexts (is 'context' the passages? name it contexts); the header has: question, answer, "
      "context"]),
    (["question", "answer", "retrieved_passages"], "contexts",
     ["(is 'retrieved_passages' the passages? name it contexts)", "the header has: question, answer, "
      "retrieved_passages"]),
    (["user_input", "response", "documents"], "contexts", ["accepted names: contexts, retrieved_contexts",
                                                           "the header has: user_input, response, documents"]),
    (["question", "contexts"], "generated_answer", ["missing column (accepted names: generated_answer, answer, "
                                                    "response) for the layout one row per answer"]),
    (["query_id", "query", "passage_id", "passage"], "generated_answer",
     ["missing column for the layout one row per passage: query_id, query, passage_id, passage, generated_answer (or "
      "one row per answer", "the header has: query_id, query, passage_id, passage"]),
]


@pytest.mark.parametrize(("header", "field", "fragments"), MISSING_COLUMNS, ids=[",".join(m[0]) for m in MISSING_COLUMNS])
def test_a_missing_column_names_the_layout_the_columns_found_and_the_accepted_names(
        header: list[str], field: str, fragments: list[str], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cells = {"contexts": '["x is y."]', "context": '["x is y."]', "retrieved_passages": '["x is y."]',
             "documents": '["x is y."]'}
    row = [cells.get(name, "x is y [1]." if name in ("answer", "response") else "1" if name == "passage_id" else
                     "What is x?") for name in header]
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows([header, row])
    (tmp_path / "in.csv").write_text(out.getvalue(), encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps({**CONFIG, "input": "in.csv", "output_dir": "out", "judge": JUDGE}))
    for command in ("eval", "validate"):
        caplog.clear()
        with caplog.at_level("INFO"):
            assert main(["-q", command, "--config", str(tmp_path / "c.json")]) == 3
        errors = [r.getMessage() for r in caplog.records if r.levelno >= 40]
        assert len(errors) == 1 and f"in.csv:1: field '{field}': " in errors[0], errors
        assert all(fragment in errors[0] for fragment in fragments), errors[0]
    for data, name in ((tmp_path / "in.csv", "in.csv"), (pd.read_csv(tmp_path / "in.csv"), "DataFrame")):
        with pytest.raises(InputError) as caught:
            evaluate(data, config=CONFIG, judge=JUDGE)
        assert caught.value.file.endswith(name) and caught.value.field == field
        assert all(fragment in caught.value.problem for fragment in fragments), caught.value.problem


@pytest.mark.slow
def test_a_missing_column_at_the_service(service: Any) -> None:
    reply = service.client().post("/v1/jobs", json={"config": CONFIG, "judge_profile": "sim", "inputs": {
        "format": "csv", "data": 'question,answer,context\nWhat is x?,x is y [1].,"[""x is y.""]"\n'}})
    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert (problem["field"], problem["line"]) == ("contexts", 1)
    assert "(is 'context' the passages? name it contexts); the header has: question, answer, context" in \
        problem["detail"]


def test_answers_all_numbers_in_the_contexts_layout_are_refused_too(tmp_path: Path,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    text = 'question,answer,contexts\nHow many?,42,"[""42 of them.""]"\nHow old?,7,"[""Seven years.""]"\n'
    (tmp_path / "in.csv").write_text(text, encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps({**CONFIG, "input": "in.csv", "output_dir": "out", "judge": JUDGE}))
    with caplog.at_level("INFO"):
        assert main(["-q", "eval", "--config", str(tmp_path / "c.json")]) == 3
    assert "in.csv:2: field 'answer': every value of this text column is a number (this one '42')" in caplog.text
    with pytest.raises(InputError) as caught:
        evaluate(pd.read_csv(tmp_path / "in.csv", dtype=str), config=CONFIG, judge=JUDGE)
    assert (caught.value.file, caught.value.field) == ("DataFrame row 0", "answer")
    mixed = text.replace("How old?,7,", "How old?,Seven years [1].,")
    (tmp_path / "in.csv").write_text(mixed, encoding="utf-8")
    assert main(["-q", "validate", "--config", str(tmp_path / "c.json")]) == 0
