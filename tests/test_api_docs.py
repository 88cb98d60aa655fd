"""docs/python-api.md, run verbatim the way a notebook runs cells: every ```python block in order, in one
namespace, inside a running event loop (top-level ``await`` allowed), against the simulated judge. The DataFrame
the docs build is then evaluated by the CLI, and the API's table must hold results.csv's values."""

from __future__ import annotations

import ast
import asyncio
import csv
import math
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pd = pytest.importorskip("pandas", reason="pandas (the 'api' extra) is not installed")

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.MULTILINE | re.DOTALL)


def code_blocks(path: Path) -> list[str]:
    return BLOCK.findall(path.read_text(encoding="utf-8"))


async def run_cells(blocks: list[str]) -> dict[str, Any]:
    """Each block as a notebook cell: compiled with top-level await, run while this loop is running."""
    assert asyncio.get_running_loop().is_running()
    namespace: dict[str, Any] = {"__name__": "__notebook__"}
    for index, block in enumerate(blocks):
        code = compile(block, f"{DOC.name}[block {index}]", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)  # noqa: S307 - our own documentation
        if asyncio.iscoroutine(result):
            await result
    return namespace


def test_docs_examples_run_in_a_running_loop_and_match_the_cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = code_blocks(DOC)
    assert len(blocks) >= 5
    ns = asyncio.run(run_cells(blocks))
    printed = capsys.readouterr().out
    assert "data[0]: field 'answer': expected a list of statements or a string, got a number" in printed
    assert "1 metric gate(s) failed" in printed and "citation.f1 = " in printed and "worst queries: " in printed
    assert "True" in printed  # aevaluate gave the same citation.f1 column as evaluate

    # the CLI on the same data: the DataFrame written as a CSV with its contexts as JSON lists
    frame = ns["df"].copy()
    frame["contexts"] = frame["contexts"].map(lambda items: __import__("json").dumps(items))
    frame.to_csv(tmp_path / "data.csv", index=False)
    (tmp_path / "eval.yaml").write_text("input: data.csv\noutput_dir: cli\njudge:\n  simulated: {seed: 1}\n"
                                        "evaluators:\n  - type: trec\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", "eval.yaml"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    with (tmp_path / "cli" / "results.csv").open(newline="", encoding="utf-8") as handle:
        cli_rows = list(csv.DictReader(handle))
    table = ns["table"]
    assert list(table.columns) == list(cli_rows[0].keys())
    assert len(table) == len(cli_rows) == 3
    checked = 0
    for (_, api_row), cli_row in zip(table.iterrows(), cli_rows, strict=True):
        assert api_row["query_id"] == cli_row["query_id"] and str(api_row["run"]) == cli_row["run"]
        for column, cell in cli_row.items():
            if column in ("query_id", "query", "run", "simulated_judge") or column.endswith(".error"):
                continue
            value = api_row[column]
            if cell == "":
                assert math.isnan(value), column
            else:
                assert value == float(cell), (column, value, cell)
                checked += 1
    assert checked > 30
    assert table["citation.f1"].tolist() == [float(r["citation.f1"]) for r in cli_rows]
    assert sorted(p.name for p in ns["saved"].iterdir()) == sorted(p.name for p in (tmp_path / "cli").iterdir())


def test_every_example_of_the_readme_python_sections_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    blocks = code_blocks(ROOT / "README.md")
    assert blocks, "the README has From Python / In CI with pytest examples"
    ns = asyncio.run(run_cells(blocks))
    assert ns["results"].mean("citation.f1") == 1.0
    ns["test_rag_quality"]()
