"""The manifest names the bytes a run read, and an input file that changes while a run reads it fails the run.

A streamed input (JSONL or CSV) is read twice: its shape, then its outputs window by window. The manifest's
``input.sha256`` is the digest of the bytes the shape pass read, taken as it read them; a file whose size or mtime
differs when a later window is read, or whose bytes read by the windows have another digest, fails the run (exit 3
naming the file) and publishes nothing: a run's results never mix two files.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.run.source import CsvSource, JsonlSource

CONFIG = {"evaluators": [{"type": "trec", "metrics": ["citation"]}]}
JUDGE = {"simulated": {"seed": 1}, "cache": False}


PAD = " Background." * 100  # a file larger than a reader's buffer: the rewritten bytes are read


def _jsonl(n: int, word: str = "old") -> str:
    return "".join(json.dumps({"query_id": f"q{i}", "query": f"What is topic {i}?", "answer": f"Topic {i} is {word} [1].",
                               "passages": [{"id": "1", "text": f"Topic {i} is {word}.{PAD}"}]}) + "\n"
                   for i in range(n))


def _csv(n: int, word: str = "old") -> str:
    rows = "".join(f"q{i},What is topic {i}?,1,Topic {i} is {word}.{PAD},Topic {i} is {word} [1].\n" for i in range(n))
    return "query_id,query,passage_id,passage,generated_answer\n" + rows


def _write(tmp_path: Path, suffix: str, text: str) -> Path:
    path = tmp_path / f"in.{suffix}"
    path.write_text(text, encoding="utf-8")
    (tmp_path / "c.json").write_text(json.dumps({**CONFIG, "input": path.name, "output_dir": "out", "judge": JUDGE}))
    return path


def _eval(tmp_path: Path) -> int:
    return main(["-q", "eval", "--config", str(tmp_path / "c.json")])


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_the_manifest_names_the_digest_of_the_bytes_read(suffix: str, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    text = _jsonl(4) if suffix == "jsonl" else _csv(4)
    path = _write(tmp_path, suffix, text)
    monkeypatch.chdir(tmp_path)
    assert _eval(tmp_path) == 0
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["input"]["sha256"] == hashlib.sha256(text.encode("utf-8")).hexdigest()
    path.write_text(text.replace("old", "new"), encoding="utf-8")  # changed after the run: the manifest keeps its own
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["input"]["sha256"] == \
        hashlib.sha256(text.encode("utf-8")).hexdigest()


def _changing(monkeypatch: pytest.MonkeyPatch, kind: Any, path: Path, new: str, keep_stamp: bool) -> None:
    """The outputs reader of ``kind`` rewrites ``path`` with ``new`` once its first query is read (the judging of
    the first window has not begun); ``keep_stamp``: same size and mtime as before (only the bytes differ)."""
    sizes, groups = kind.readers()

    def rewriting(file: Path, tap: Any = None) -> Iterator[Any]:
        for n, group in enumerate(groups(file, tap)):
            if n == 0:
                info = path.stat()
                with path.open("r+b") as handle:  # in place: the reader's open file sees the new bytes
                    handle.write(new.encode("utf-8"))
                if keep_stamp:
                    assert path.stat().st_size == info.st_size
                    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
            yield group

    monkeypatch.setattr(kind, "readers", staticmethod(lambda: (sizes, rewriting)))


@pytest.mark.parametrize("keep_stamp", [False, True], ids=["mtime", "same-size-and-mtime"])
@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_an_input_changed_while_the_run_reads_it_fails_the_run_and_publishes_nothing(
        suffix: str, keep_stamp: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    make = _jsonl if suffix == "jsonl" else _csv
    path = _write(tmp_path, suffix, make(30))
    monkeypatch.chdir(tmp_path)
    _changing(monkeypatch, JsonlSource if suffix == "jsonl" else CsvSource, path, make(30, "now"), keep_stamp)
    with caplog.at_level("INFO"):
        assert _eval(tmp_path) == 3
    errors = [r.getMessage() for r in caplog.records if r.levelno >= 40]
    what = "the digest of its bytes" if keep_stamp else "its size or modification time"
    assert errors and errors[-1].endswith(f"{path}: the input changed while the run read it ({what} differs from "
                                          "when it was first read): its results would mix two files, so nothing is "
                                          "published; run again"), errors
    assert not (tmp_path / "out").exists()


def test_a_shard_whose_input_changes_while_it_reads_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    path = _write(tmp_path, "jsonl", _jsonl(30))
    monkeypatch.chdir(tmp_path)
    _changing(monkeypatch, JsonlSource, path, _jsonl(30, "now"), keep_stamp=False)
    with caplog.at_level("INFO"):
        assert main(["-q", "eval", "--config", str(tmp_path / "c.json"), "--shard", "0/2", "--output-dir",
                     str(tmp_path / "s")]) == 3
    assert f"{path}: the input changed while the run read it" in caplog.text
    assert not (tmp_path / "s").exists()
