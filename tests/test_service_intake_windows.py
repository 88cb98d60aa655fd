"""The service's intake counts and checks a job's input a window at a time (never the whole input in memory) and
still refuses a bad field anywhere in it, naming line and field, as reading it at once does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from open_rag_eval.config import load_config_text
from open_rag_eval.core.errors import InputError
from open_rag_eval.run import outputs as run_outputs
from open_rag_eval.service import intake

N = 2_500  # more than two windows


def _write(folder: Path, bad_line: int | None = None) -> None:
    lines = []
    for i in range(N):
        row = {"query_id": f"q{i // 2}", "query": f"What about topic {i // 2}?", "run": i % 2 + 1,
               "passages": [{"id": "d0", "text": f"Topic {i // 2} is studied widely."}],
               "answer": [{"text": f"Topic {i // 2} is studied.", "citations": ["d0"]}]}
        if bad_line == i + 1:
            row["passages"] = [{"id": "d0"}]  # JSON, but no passage text: found when its window is read
        lines.append(json.dumps(row))
    (folder / "outputs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _loaded(folder: Path) -> object:
    return load_config_text("input: outputs.jsonl\nevaluators:\n  - type: golden\n", base_dir=folder)


@pytest.fixture(autouse=True)
def _never_read_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    def whole(*args: object, **kwargs: object) -> None:
        raise AssertionError("the intake read the whole input")

    monkeypatch.setattr(run_outputs, "load_outputs", whole)


def test_counts_every_output_and_the_limits_queries(tmp_path: Path) -> None:
    _write(tmp_path)
    assert intake._count(_loaded(tmp_path), None) == N
    assert intake._count(_loaded(tmp_path), 10) == 20  # the first 10 queries, 2 runs each


def test_a_bad_field_in_a_late_window_is_refused_naming_its_line(tmp_path: Path) -> None:
    _write(tmp_path, bad_line=2_401)
    with pytest.raises(InputError) as found:
        intake._count(_loaded(tmp_path), None)
    assert found.value.line == 2_401 and "text" in str(found.value)
