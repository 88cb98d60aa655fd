"""`eval --shard` and `merge` in windows: a sharded run in small windows merges into the bytes of a local run; the
streamed shard format refuses an earlier format, a cut or broken record, and shards that do not make up one run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.config import load_config
from open_rag_eval.executors import array
from open_rag_eval.executors.shards import split_by_query
from open_rag_eval.inputs.jsonl import read_jsonl_outputs
from open_rag_eval.run import evaluation, pipeline
from open_rag_eval.run.spill import Spill
from tests.test_run_windows import FILES, _config as _local_config, _outputs, write_config

WINDOW = 5  # outputs: q0 q1 | q2 q3 | q4 q5 | q6 q7 | q8 (2 or 3 runs a query)


def _config(tmp_path: Path, name: str, lines: list[dict], hhem: Path | None = None) -> Path:
    """The windows test's config, the judge-health controls on (merged shards ask them once, as the local run
    does); ``hhem``: trec scores HHEM too, with the model in that folder."""
    config = _local_config(tmp_path, name, lines)
    text = config.read_text(encoding="utf-8")
    if hhem is not None:
        text = text.replace("no_answer]}", f"no_answer, hhem], hallucination: {{model_path: '{hhem}', device: cpu}}}}")
    config.write_text(text, encoding="utf-8")
    return config


def _counting(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], list[int]]:
    """The window size set small; the sizes of the windows spilled and of those the shards evaluated."""
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", WINDOW)
    spilled: list[int] = []
    evaluated: list[int] = []
    real_add, real_evaluate = Spill.add, array.evaluate_all
    monkeypatch.setattr(Spill, "add", lambda self, outputs, parts: (spilled.append(len(outputs)),
                                                                      real_add(self, outputs, parts))[1])

    async def evaluate_all(evaluators, outputs, *args, **kwargs):  # type: ignore[no-untyped-def]
        evaluated.append(len(outputs))
        return await real_evaluate(evaluators, outputs, *args, **kwargs)

    monkeypatch.setattr(array, "evaluate_all", evaluate_all)
    return spilled, evaluated


def _shards(tmp_path: Path, config: Path, n: int = 3) -> list[Path]:
    folders = [tmp_path / f"shard{i}" for i in range(n)]
    for i, folder in enumerate(folders):
        assert main(["-q", "eval", "--config", str(config), "--shard", f"{i}/{n}", "--output-dir", str(folder)]) == 0
    return folders


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A local run in windows of 5 outputs and the same config as 3 shards merged, both with trec (simulated
    judge; HHEM with a tiny model, scored in the merge's model stage window by window), golden and consistency
    (judge test-retest: the merge asks the judge with the shards' nugget lists)."""
    from open_rag_eval.hhem.tiny import write_tiny_hhem

    tmp_path = tmp_path_factory.mktemp("streamed")
    config = _config(tmp_path, "data", _outputs(), hhem=write_tiny_hhem(tmp_path / "tiny-hhem"))
    with pytest.MonkeyPatch.context() as monkeypatch:
        spilled, evaluated = _counting(monkeypatch)
        local = pipeline.run(load_config(config)).output_dir
        local_windows = list(spilled)
        spilled.clear()
        monkeypatch.setattr(array, "load_outputs", lambda *args: pytest.fail("a shard read the whole input"))
        shards = _shards(tmp_path, config)
        shard_windows = list(evaluated)
        assert main(["-q", "merge", *map(str, reversed(shards)), "--output-dir", str(tmp_path / "merged")]) == 0
    return {"local": local, "merged": tmp_path / "merged", "shards": shards, "local_windows": local_windows,
            "merge_windows": list(spilled), "shard_windows": shard_windows, "tmp": tmp_path}


def test_a_sharded_run_in_windows_merges_into_the_bytes_of_a_local_run(made: dict) -> None:
    local, merged = made["local"], made["merged"]
    for name in FILES:
        assert (merged / name).read_bytes() == (local / name).read_bytes(), name
    assert made["local_windows"] == made["merge_windows"] == [5, 5, 5, 5, 2]  # the run's own windows
    document = json.loads((merged / "results.json").read_text(encoding="utf-8"))
    assert all(0 < o["scores"]["hhem.score"] < 1 and "golden.ndcg@2" in o["scores"] for o in document["outputs"]
               if not o["error"])
    assert all("consistency.rougeL" in q["scores"] for q in document["queries"])
    # each shard evaluated in windows, none larger than the run's, cut where the run's windows are cut
    assert len(made["shard_windows"]) > 3 and max(made["shard_windows"]) <= WINDOW
    headers = [json.loads((folder / "shard.json").read_text()) for folder in made["shards"]]
    # the split of the whole-input reader (split_by_query), from the input's shape alone: q0-q3 | q4 q5 | q6-q8
    assert [h["positions"] for h in headers] == [[[0, 10]], [[10, 15]], [[15, 22]]]
    outputs = read_jsonl_outputs(made["tmp"] / "data.jsonl")
    assert [[[s[0], s[-1] + 1]] for s in split_by_query(outputs, 3)] == [h["positions"] for h in headers]
    assert [h["n_records"] for h in headers] == [4, 2, 3]  # one record a query
    summary = json.loads((merged / "manifest.json").read_text())
    assert summary["complete"] is True and summary["n_outputs"] == 22


def test_shards_of_interleaved_queries_merge_into_the_local_run_s_one_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = sorted(_outputs(), key=lambda line: line["run"])  # every query's run 1, then every run 2, ...
    config = _config(tmp_path, "mixed", lines)
    spilled, _ = _counting(monkeypatch)
    local = pipeline.run(load_config(config)).output_dir
    shards = _shards(tmp_path, config, 2)
    assert main(["-q", "merge", *map(str, shards), "--output-dir", str(tmp_path / "merged")]) == 0
    assert spilled == [22, 22]  # one window each, as a local run of interleaved queries
    for name in FILES:
        assert (tmp_path / "merged" / name).read_bytes() == (local / name).read_bytes(), name
    header = json.loads((shards[0] / "shard.json").read_text())
    assert header["contiguous"] is False and len(header["positions"]) > 1  # ranges of interleaved positions


def _copy(made: dict, tmp_path: Path) -> list[Path]:
    copies = []
    for folder in made["shards"]:
        copies.append(tmp_path / folder.name)
        shutil.copytree(folder, copies[-1])
    return copies


def _merge(folders: list[Path], tmp_path: Path) -> int:
    return main(["-q", "merge", *map(str, folders), "--output-dir", str(tmp_path / "out")])


def _redigest(folder: Path) -> None:
    """The header's digest made to name the records as they are now (a damage the digest does not see: the
    reader's own checks are what stops it)."""
    import hashlib

    header = folder / "shard.json"
    data = json.loads(header.read_text())
    data["records_sha256"] = hashlib.sha256((folder / "records.jsonl").read_bytes()).hexdigest()
    header.write_text(json.dumps(data))


def test_a_shard_of_the_earlier_format_is_refused_with_the_advice_to_run_it_again(
        made: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folders = _copy(made, tmp_path)
    header = folders[1] / "shard.json"
    header.write_text(json.dumps({"format": 1, "index": 1, "of": 3, "outputs": [], "parts": []}))
    (folders[1] / "records.jsonl").unlink()
    assert _merge(folders, tmp_path) == 3
    assert f"{header}: field 'format': a shard of format 1" in caplog.text
    assert "run this shard again (eval --shard 1/3)" in caplog.text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("damage, line", [("cut", 3), ("garbage", 2), ("lost", None)])
def test_a_cut_or_broken_record_is_refused_naming_file_and_line(
        made: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str, line: int | None) -> None:
    folders = _copy(made, tmp_path)
    records = folders[2] / "records.jsonl"
    lines = records.read_text(encoding="utf-8").splitlines(keepends=True)
    if damage == "cut":  # a record cut short (a copy that stopped)
        lines[2] = lines[2][:len(lines[2]) // 2]
    elif damage == "garbage":
        lines[1] = '{"positions": [9], "outputs": [{"query_id": 5}], "parts": [], "nuggets": []}\n'
    else:
        del lines[2]
    records.write_text("".join(lines), encoding="utf-8")
    _redigest(folders[2])
    assert _merge(folders, tmp_path) == 3
    where = f"{records}:{line}: not a shard record" if line else f"{records}: the shard holds 2 records, its"
    assert where in caplog.text and "run this shard again" in caplog.text
    assert not (tmp_path / "out").exists()


def test_records_that_do_not_hold_the_header_s_positions_are_refused(
        made: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folders = _copy(made, tmp_path)
    records = folders[0] / "records.jsonl"
    lines = records.read_text(encoding="utf-8").splitlines(keepends=True)
    records.write_text("".join([lines[1], lines[0], *lines[2:]]), encoding="utf-8")  # two queries swapped
    _redigest(folders[0])
    assert _merge(folders, tmp_path) == 3
    assert f"{records}: the shard's records do not hold the positions its header names" in caplog.text


def _edit_score(records: Path, metric: str, value: object) -> int:
    """The first score of ``metric`` in ``records`` set to ``value``; the line it is on."""
    lines = records.read_text(encoding="utf-8").splitlines(keepends=True)
    for n, line in enumerate(lines):
        data = json.loads(line)
        for part in data["parts"]:
            for score in part["scores"]:
                if score["metric"] == metric and score["value"] is not None:
                    score["value"] = value
                    lines[n] = json.dumps(data) + "\n"
                    records.write_text("".join(lines), encoding="utf-8")
                    return n + 1
    raise AssertionError(f"no value of {metric}")


@pytest.mark.parametrize("metric, value", [("umbrela.mean", 7.0), ("umbrela.mean", 1.125), ("citation.f1", 0.123)])
def test_a_record_edited_after_it_was_written_is_refused_by_its_digest(
        made: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture, metric: str, value: float) -> None:
    """Out of range or not, a value edited after the shard was written fails the merge (exit 3) naming the file,
    before anything is merged: nothing is published."""
    folders = _copy(made, tmp_path)
    records = folders[1] / "records.jsonl"
    _edit_score(records, metric, value)
    assert _merge(folders, tmp_path) == 3
    assert f"{records}: field 'records_sha256': the records do not match the digest in shard.json" in caplog.text
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("metric, value, span", [("umbrela.mean", 7.0, "[0, 3]"), ("umbrela.mean", -0.5, "[0, 3]"),
                                                 ("citation.f1", 1.5, "[0, 1]"), ("umbrela.n_failed", -1.0, "[0, ∞]"),
                                                 ("citation.precision", 1e999, "[0, 1]")])
def test_a_value_outside_its_metric_s_range_is_refused_even_with_a_matching_digest(
        made: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture, metric: str, value: float, span: str) -> None:
    folders = _copy(made, tmp_path)
    records = folders[2] / "records.jsonl"
    line = _edit_score(records, metric, value)
    _redigest(folders[2])
    assert _merge(folders, tmp_path) == 3
    assert f"{records}:{line}: field '{metric}': {value!r} for query_id " in caplog.text
    assert f"is outside the metric's range {span}" in caplog.text
    assert not (tmp_path / "out").exists()


def test_a_shard_without_a_digest_of_its_records_is_refused(made: dict, tmp_path: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    folders = _copy(made, tmp_path)
    header = folders[0] / "shard.json"
    data = json.loads(header.read_text())
    assert len(data.pop("records_sha256")) == 64
    header.write_text(json.dumps(data))
    assert _merge(folders, tmp_path) == 3
    assert f"{header}: field 'records_sha256': the shard names no digest of its records.jsonl" in caplog.text


def test_shards_given_twice_missing_or_overlapping_are_refused(
        made: dict, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folders = _copy(made, tmp_path)
    assert _merge(folders[:2], tmp_path) == 3 and "shard(s) 2/3 missing" in caplog.text
    assert _merge([*folders, folders[0]], tmp_path) == 3 and "shard 0/3 is given twice" in caplog.text
    header = folders[1] / "shard.json"
    data = json.loads(header.read_text())
    data["positions"] = [[6, 14]]  # claims an output of shard 0 as well
    header.write_text(json.dumps(data))
    assert _merge(folders, tmp_path) == 3
    assert "field 'positions': the shards do not hold every output exactly once" in caplog.text
    assert not (tmp_path / "out").exists()


def test_an_input_that_changes_between_its_shape_and_its_outputs_fails_the_shard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The shard's positions come from the input's shape: outputs read later that do not match it (the file was
    rewritten meanwhile) must not be written under those positions."""
    from open_rag_eval.inputs.jsonl import jsonl_query_groups, jsonl_query_sizes
    from open_rag_eval.run.source import JsonlSource

    config = _config(tmp_path, "moving", _outputs())

    def sizes(path: Path, tap=None):  # type: ignore[no-untyped-def]
        for query_id, size, answered in jsonl_query_sizes(path, tap):
            yield query_id, size + (query_id == "q1"), answered  # q1 had one more line when the shape was read

    monkeypatch.setattr(JsonlSource, "readers", staticmethod(lambda: (sizes, jsonl_query_groups)))
    assert main(["-q", "eval", "--config", str(config), "--shard", "0/2", "--output-dir", str(tmp_path / "s")]) == 3
    assert "the input changed while the shard read it (query 'q1': 3 outputs, 4 a moment before)" in caplog.text
    assert not (tmp_path / "s").exists()


def test_shards_of_a_csv_input_stream_and_merge_into_the_bytes_of_a_local_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CSV input is split from its shape too (each query's number of outputs), then read a window at a time."""
    from tests.test_csv_windows import _csv, _rows

    data = tmp_path / "data.csv"
    data.write_text(_csv(_rows()), encoding="utf-8")
    config = write_config(tmp_path, data, "csv")
    spilled, evaluated = _counting(monkeypatch)
    local = pipeline.run(load_config(config)).output_dir
    local_windows = list(spilled)
    monkeypatch.setattr(array, "load_outputs", lambda *args: pytest.fail("a shard read the whole input"))
    shards = _shards(tmp_path, config)
    assert len(evaluated) > 3 and max(evaluated) <= WINDOW  # each shard in windows, none larger than the run's
    spilled.clear()
    assert main(["-q", "merge", *map(str, shards), "--output-dir", str(tmp_path / "merged")]) == 0
    assert spilled == local_windows and len(local_windows) > 3
    for name in FILES:
        assert (tmp_path / "merged" / name).read_bytes() == (local / name).read_bytes(), name
