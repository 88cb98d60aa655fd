"""A connector's outputs are spooled as they are fetched and evaluated window by window from that file: the files of
a run given the same outputs in memory, byte for byte, in the order of the queries (also when a resumed run fetches
a query again after the others were saved)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import pytest
from pydantic import BaseModel

from open_rag_eval.config import load_config
from open_rag_eval.core.types import AnswerPart, Labels, Passage, RAGOutput
from open_rag_eval.run import journal as journal_module
from open_rag_eval.run import evaluation, pipeline, start
from open_rag_eval.run.journal import OutputJournal
from open_rag_eval.run.spill import Spill

FILES = ("results.csv", "results.json", "summary.csv", "outputs.jsonl")
WORDS = "solar wind grid battery storage carbon price market coal hydro power demand supply heat pump".split()


class ScriptedOptions(BaseModel):
    concurrency: int = 3  # queries a batch
    reverse: bool = True  # a batch's outputs come back last first (as a connector gathering replies may give them)


class ScriptedConnector:
    """Answers every query from its words; records the query ids of each call."""

    Options = ScriptedOptions
    asked: ClassVar[list[list[str]]] = []
    fail: ClassVar[set[str]] = set()  # query ids whose first run fails (not an option: a resumed run reuses saved
    # outputs only when the connector's options are the same)

    def __init__(self, options: ScriptedOptions) -> None:
        self.options = options

    async def fetch(self, queries: list[tuple[str, str]], repeats: int) -> list[RAGOutput]:
        ScriptedConnector.asked.append([query_id for query_id, _ in queries])
        outputs = [self._output(query_id, query, run) for query_id, query in queries for run in range(1, repeats + 1)]
        return outputs[::-1] if self.options.reverse else outputs

    def _output(self, query_id: str, query: str, run: int) -> RAGOutput:
        if run == 1 and query_id in self.fail:
            return RAGOutput(query_id=query_id, query=query, run=run, error="timeout")
        q = int(query_id[1:])
        words = WORDS[q:q + 4]
        passages = tuple(Passage(id=str(i), text=f"{' '.join(words)} text {i} of {query_id}.") for i in (1, 2))
        parts = (AnswerPart(text=f"{words[0].capitalize()} meets {words[run % 4]}.", citations=("1",)),
                 AnswerPart(text=f"Also {words[2]}.", citations=("2",)))
        return RAGOutput(query_id=query_id, query=query, run=run, passages=passages, answer=parts,
                         answer_text=" ".join(f"{p.text[:-1]} [{p.citations[0]}]." for p in parts))


def _config(tmp_path: Path, name: str, options: str) -> Path:
    queries = tmp_path / "queries.csv"
    queries.write_text("query_id,query,relevant_ids\n" + "".join(
        f"q{q},What about {WORDS[q]} and {WORDS[q + 1]}?,{1 + q % 2}\n" for q in range(8)), encoding="utf-8")
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        f"connector:\n  type: 'tests.test_fetched_windows:ScriptedConnector'\n  queries: queries.csv\n  repeats: 2\n"
        f"  options: {options}\noutput_dir: {name}-out\n"
        "judge:\n  model: simulated-judge\n  simulated: {latency_ms: 0, jitter_ms: 0}\n  cache: false\n"
        "evaluators:\n"
        "  - {type: trec, k_values: [1, 2], metrics: [umbrela, citation, no_answer]}\n"
        "  - {type: golden, k_values: [1, 2]}\n", encoding="utf-8")
    return config


def _in_query_order(outputs: list[RAGOutput]) -> list[tuple[str, int]]:
    return [(o.query_id, o.run) for o in outputs]


def _count_windows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    sizes: list[int] = []
    real_add = Spill.add
    monkeypatch.setattr(Spill, "add", lambda self, outputs, parts: (sizes.append(len(outputs)),
                                                                      real_add(self, outputs, parts))[1])
    return sizes


def test_fetched_outputs_in_windows_give_the_files_of_the_same_outputs_in_memory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", 4)
    sizes = _count_windows(monkeypatch)
    ScriptedConnector.asked.clear()
    monkeypatch.setattr(ScriptedConnector, "fail", {"q5"})
    report = pipeline.run(load_config(_config(tmp_path, "fetched", "{}")))
    assert sizes == [4, 4, 4, 4] and ScriptedConnector.asked == [["q0", "q1", "q2"], ["q3", "q4", "q5"], ["q6", "q7"]]
    given = report.outputs  # a small run's outputs, as the connector gave them (labels of the queries file)
    # each query's outputs together, in the order of the queries; a query's runs in the order they came
    assert _in_query_order(given) == [(f"q{q}", run) for q in range(8) for run in (2, 1)]
    assert given[11].error == "timeout" and given[3].labels.relevant_ids == {"2": 1} and given[3].source is None
    made = ScriptedConnector(ScriptedOptions())
    assert given == [made._output(f"q{q}", f"What about {WORDS[q]} and {WORDS[q + 1]}?", run).model_copy(
        update={"labels": Labels(relevant_ids={str(1 + q % 2): 1})}) for q in range(8) for run in (2, 1)]
    assert not (tmp_path / "fetched-out" / pipeline.FETCHED_FILE).exists()
    sizes.clear()
    in_memory = pipeline.run(load_config(_config(tmp_path, "memory", "{}")), outputs=given)
    assert sizes == [4, 4, 4, 4]
    for name in FILES:
        assert (report.output_dir / name).read_bytes() == (in_memory.output_dir / name).read_bytes(), name


def test_a_resumed_fetch_evaluates_the_saved_and_the_new_outputs_in_the_order_of_the_queries(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", 4)
    failing = _config(tmp_path, "resumed", "{}")
    monkeypatch.setattr(ScriptedConnector, "fail", {"q1", "q5"})
    real_loop = pipeline.run_loop

    async def stop(*args: object, **kwargs: object) -> None:
        raise RuntimeError("stopped")  # the run stops once every output is fetched and saved

    monkeypatch.setattr(pipeline, "run_loop", stop)
    ScriptedConnector.asked.clear()
    with pytest.raises(RuntimeError, match="stopped"):
        pipeline.run(load_config(failing))
    partial = tmp_path / ".resumed-out.partial"
    assert sorted(p.name for p in partial.iterdir()) == [".open-rag-eval-connector.json", "outputs.jsonl"]
    monkeypatch.setattr(pipeline, "run_loop", real_loop)
    monkeypatch.setattr(ScriptedConnector, "fail", set())
    sizes = _count_windows(monkeypatch)
    ScriptedConnector.asked.clear()
    report = pipeline.run(load_config(failing))
    assert ScriptedConnector.asked == [["q1", "q5"]]  # the saved queries are not asked again
    journal = (partial.parent / "resumed-out" / "outputs.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(journal) == 16 and sizes == [4, 4, 4, 4]
    given = report.outputs
    assert _in_query_order(given) == [(f"q{q}", run) for q in range(8) for run in ((2, 1) if q in (1, 5) else (1, 2))]
    # saved queries read back from the journal, runs in order, where the first run saved them (its batches came
    # back last first); the queries fetched again as they came
    assert [o.source for o in given[:2]] == [f"{partial}/outputs.jsonl:6", f"{partial}/outputs.jsonl:5"]
    assert given[2].source is None and given[2].error is None  # q1: fetched again, now answered
    assert given[5].source == f"{partial}/outputs.jsonl:1"  # q2 run 2, the first line saved
    in_memory = pipeline.run(load_config(_config(tmp_path, "memory", "{}")), outputs=given)
    for name in FILES:
        assert (report.output_dir / name).read_bytes() == (in_memory.output_dir / name).read_bytes(), name


def test_a_large_connector_run_reads_its_outputs_back_from_its_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(start, "CONTROL_OUTPUTS", 10)  # more outputs than that: not kept for the caller
    report = pipeline.run(load_config(_config(tmp_path, "large", "{}")))
    assert report._outputs is None
    assert _in_query_order(report.outputs) == [(f"q{q}", run) for q in range(8) for run in (2, 1)]
    assert report.outputs[0].source == f"{report.output_dir / 'outputs.jsonl'}:1"


def _journal(folder: Path, queries: list[tuple[str, str]]) -> None:
    """A journal as an unfinished run leaves it: batches came back last first, q1's first run failed, q3's text
    changed since it was asked, q9 is no longer a query, and the last line was cut by a kill."""
    from open_rag_eval.inputs import output_to_json

    made = ScriptedConnector(ScriptedOptions())
    ScriptedConnector.fail = {"q1"}
    try:
        asked = [*queries[:3], (queries[3][0], "An older text?"), *queries[4:], ("q9", "Gone?")]
        outputs = [made._output(query_id, query, run) for query_id, query in asked for run in (2, 1)]
    finally:
        ScriptedConnector.fail = set()
    folder.mkdir()
    lines = "".join(json.dumps(output_to_json(o), ensure_ascii=False) + "\n" for o in outputs)
    (folder / "outputs.jsonl").write_text(lines + '{"query_id": "q7", "que', encoding="utf-8")
    (folder / ".open-rag-eval-connector.json").write_text(json.dumps({"identity": "same"}) + "\n", encoding="utf-8")


def test_a_journal_is_reused_as_a_stream_with_the_outputs_and_lines_of_reading_it_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    queries = [(f"q{q}", f"What about {WORDS[q]} and {WORDS[q + 1]}?") for q in range(8)]
    found = {}
    for name in ("streamed", "at-once"):
        folder = tmp_path / name
        _journal(folder, queries)
        journal = OutputJournal(folder, "same")
        if name == "streamed":
            monkeypatch.setattr(OutputJournal, "saved", lambda self: pytest.fail("read at once"))
        else:
            monkeypatch.undo()
            monkeypatch.setattr(journal_module, "_line_places", lambda path: None)  # as if queries were apart
        emitted: list[RAGOutput] = []
        reused = journal.reuse(queries, 2, emitted.extend)
        lines = [o.model_copy(update={"source": (o.source or "").replace(str(folder), "")}) for o in emitted]
        found[name] = (reused, lines, (folder / "outputs.jsonl").read_text(encoding="utf-8"))
    assert found["streamed"] == found["at-once"]  # (the folder's name aside)
    reused, emitted, lines = found["streamed"]
    assert reused == {"q0", "q2", "q4", "q5", "q6", "q7"}  # not q1 (a run failed), q3 (asked as another text)
    assert _in_query_order(emitted) == [(f"q{q}", run) for q in (0, 2, 4, 5, 6, 7) for run in (1, 2)]
    assert [o.source for o in emitted[:3]] == [f"/outputs.jsonl:{n}" for n in (2, 1, 6)]  # q0 runs 1, 2; q2 run 1
    assert [json.loads(line)["query_id"] for line in lines.splitlines()] == [o.query_id for o in emitted]


def test_a_journal_of_a_query_apart_is_read_at_once(tmp_path: Path) -> None:
    queries = [(f"q{q}", f"What about {WORDS[q]} and {WORDS[q + 1]}?") for q in range(8)]
    _journal(tmp_path / "j", queries)
    path = tmp_path / "j" / "outputs.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join([lines[1], *lines[2:-1], lines[0]]) + "\n", encoding="utf-8")  # q0 run 2 last
    assert journal_module._line_places(path) is None
    emitted: list[RAGOutput] = []
    assert OutputJournal(tmp_path / "j", "same").reuse(queries, 2, emitted.extend) == {
        "q0", "q2", "q4", "q5", "q6", "q7"}
    assert _in_query_order(emitted)[:2] == [("q0", 1), ("q0", 2)]
