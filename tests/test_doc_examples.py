"""Every example of README.md and docs/*.md is executed: each fenced block of each of those files, found
generically, so a block added anywhere is checked without touching this test.

What happens to a block depends on its language (the word after the opening fence):

- ``python``: the file's python blocks run in order in one namespace, as notebook cells (top-level ``await``
  allowed, inside a running event loop), in a scratch folder;
- ``bash`` / ``sh`` / ``shell`` / ``console``: every command line runs in the scratch folder: ``open-rag-eval ...``
  and ``python -m open_rag_eval ...`` through ``open_rag_eval.cli.main`` (what the console script calls; in this
  process, so imports and models load once), and must exit 0; ``export NAME=VALUE`` sets the variable for the
  next lines (a value of ``...`` keeps the scratch folder's stand-in); ``pip install ...`` lines are not run (the
  test environment has every extra installed; they are listed); any other command is refused -- mark the block;
- ``yaml``: loaded by the real config loader over a base config (``<!-- base: PATH -->``, default a small trec
  config of the demo data): the block's sections replace the base's, so a whole config stands alone and a
  fragment (a ``judge:`` or ``sweep:`` section) is checked in context;
- ``csv`` / ``json`` / ``jsonl``: read by the real input reader (RAG outputs);
- ``text``: sample output or a sketch, not code; listed, never run.

A block without a language is an error (say what it is), as is any other language. Markers, HTML comments on the
lines right above a block (invisible on GitHub):

- ``<!-- not-run: REASON -->``: the block is not run; the reason is listed (``test_not_run_blocks_are_listed``);
- ``<!-- file: NAME -->``: the block is also written to ``NAME`` in the scratch folder, for the commands after it
  (a config the text then runs, the CSV it reads);
- ``<!-- exit: N -->``: the block's commands may also exit ``N`` (e.g. 1 for a gate the example trips on purpose).

The scratch folder (one for the whole module, shared by every doc, so the one demo run is shared too) holds a copy
of ``configs/``, results folders ``results/a``, ``results/b``, ``results/main`` (one simulated-judge run of the demo
data, copied), a small text corpus ``corpus/``, and stand-ins for what the examples expect outside: a loopback
simulated judge behind ``OPENAI_BASE_URL`` (so ``judge: {model: gpt-4o}`` configs run offline) and a loopback RAG
system behind ``RAG_URL``.
"""

from __future__ import annotations

import ast
import asyncio
import csv
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<fence>```+)(?P<lang>[^\n`]*)\n(?P<body>.*?)^(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)
MARKER = re.compile(r"^<!--\s*(?P<kind>not-run|file|exit|base)\s*:\s*(?P<value>.*?)\s*-->\s*$")
KINDS = {"python": "python", "py": "python", "bash": "shell", "sh": "shell", "shell": "shell", "console": "shell",
         "yaml": "yaml", "yml": "yaml", "csv": "csv", "json": "jsonl", "jsonl": "jsonl", "text": "text",
         "txt": "text"}
# python blocks run by a dedicated test that also checks their values: not run twice
DEDICATED = {"docs/python-api.md": "tests/test_api_docs.py::test_docs_examples_run_in_a_running_loop_and_match_the_cli",
             "README.md": "tests/test_api_docs.py::test_every_example_of_the_readme_python_sections_runs",
             "docs/tracking.md": "tests/test_tracking_mlflow.py::test_docs_python_examples_run_verbatim"}
COMMAND_TIMEOUT_S = 120
LONG_RUNNING = {"serve", "worker"}  # commands that run until stopped: never run here


@dataclass
class Block:
    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str
    body: str
    markers: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def kind(self) -> str | None:
        return KINDS.get(self.lang.strip().lower().split()[0]) if self.lang.strip() else None


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        markers: dict[str, str] = {}
        above = line - 2  # index of the line right above the fence
        while above >= 0 and (marker := MARKER.match(lines[above].strip())):
            markers.setdefault(marker["kind"], marker["value"])
            above -= 1
        found.append(Block(doc, line, match["lang"].strip(), match["body"], markers))
    return found


ALL = [block for doc in DOCS for block in blocks(doc)]


def test_every_block_says_what_it_is() -> None:
    unknown = [f"{b.where} (```{b.lang})" for b in ALL if b.kind is None]
    assert not unknown, ("blocks without a known language: give each a language (python, bash, yaml, csv, json, "
                         f"text for output or sketches) so the doc-example test knows how to run it: {unknown}")
    bad = [b.where for b in ALL if "not-run" in b.markers and len(b.markers["not-run"]) < 10]
    assert not bad, f"a not-run marker must say why (at least a few words): {bad}"


def test_not_run_blocks_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing is skipped silently: the blocks not run, with their reasons (shown with ``pytest -rP``)."""
    listed = [f"{b.where} ```{b.lang}: not run: {b.markers['not-run']}" for b in ALL if "not-run" in b.markers]
    listed += [f"{b.where} ```{b.lang}: not code (text)" for b in ALL if b.kind == "text"]
    listed += [f"{b.where} ```{b.lang}: not run: `{line}` (installs from the package index; the tests have the "
               f"extras)" for b in ALL if b.kind == "shell" and "not-run" not in b.markers
               for line in _commands(b.body) if _is_install(line)]
    listed += [f"{b.where} ```python: run by {DEDICATED[str(b.doc.relative_to(ROOT))]}" for b in ALL
               if b.kind == "python" and str(b.doc.relative_to(ROOT)) in DEDICATED and "not-run" not in b.markers]
    print("\n".join(listed))
    for test in set(DEDICATED.values()):
        path, _, name = test.partition("::")
        assert f"def {name}(" in (ROOT / path).read_text(encoding="utf-8"), test


# --- the scratch folder ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer
    from tests.rag_server import RagServer

    root = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "configs", root / "configs")
    _corpus(root / "corpus")
    with SimulatedJudgeServer() as judge, RagServer() as rag:
        env = {**os.environ, "OPENAI_BASE_URL": judge.base_url, "OPENAI_API_KEY": "sk-doc-example-not-a-key",
               "RAG_URL": rag.url, "RAG_API_KEY": "doc-example-not-a-key", "VECTARA_API_KEY": "doc-example-not-a-key",
               "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(ROOT),
               "NO_COLOR": "1"}
        (root / "base.yaml").write_text("input: configs/data/demo.csv\noutput_dir: results/base\njudge:\n"
                                        "  simulated: {seed: 1}\nevaluators:\n  - type: trec\n    metrics: "
                                        "[umbrela, nuggets, citation, no_answer]\n", encoding="utf-8")
        done = _run_command(["open-rag-eval", "eval", "--config", "base.yaml"], root, env)
        assert done.returncode == 0, done.stderr
        for name in ("a", "b", "main"):
            shutil.copytree(root / "results" / "base", root / "results" / name)
        yield root, env


def _corpus(folder: Path) -> None:
    """The demo data's passages as a folder of text files (generate-queries' --corpus)."""
    folder.mkdir()
    with (ROOT / "configs" / "data" / "demo.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    seen: dict[str, str] = {}
    for row in rows:
        seen.setdefault(row["passage"], f"{row['query_id']}-{len(seen)}")
    for text, name in seen.items():
        (folder / f"{name}.txt").write_text(text + "\n", encoding="utf-8")


def _run_command(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A real process, for the sandbox's own setup."""
    program = {"open-rag-eval": [sys.executable, "-m", "open_rag_eval"], "python": [sys.executable],
               "python3": [sys.executable]}
    return subprocess.run([*program[argv[0]], *argv[1:]], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=COMMAND_TIMEOUT_S)


def _cli(args: list[str], env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> int:
    """An ``open-rag-eval`` command run in this process (``cli.main``, what the console script calls), with the
    sandbox's environment: far faster than a process per command (imports and models are loaded once)."""
    from open_rag_eval.cli import main

    with monkeypatch.context() as patch:
        for name, value in env.items():
            if os.environ.get(name) != value:
                patch.setenv(name, value)
        try:
            return main(args)
        except SystemExit as done:  # --help, argparse errors
            return int(done.code or 0)


# --- running the blocks of one doc ----------------------------------------------------------------------------


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_doc_examples_run(doc: Path, sandbox: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    root, env = sandbox
    env = dict(env)
    monkeypatch.chdir(root)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "RAG_URL", "RAG_API_KEY", "HF_HUB_OFFLINE",
                 "MLFLOW_DISABLE_TELEMETRY"):
        monkeypatch.setenv(name, env[name])
    cells: list[tuple[Block, str]] = []
    for block in blocks(doc):  # the files a doc defines exist for all its commands
        if "file" in block.markers:
            (root / block.markers["file"]).parent.mkdir(parents=True, exist_ok=True)
            (root / block.markers["file"]).write_text(block.body, encoding="utf-8")
    for block in blocks(doc):
        if "not-run" in block.markers or block.kind in (None, "text"):
            continue
        if block.kind == "python":
            if str(doc.relative_to(ROOT)) not in DEDICATED:
                cells.append((block, block.body))
        elif block.kind == "shell":
            _shell(block, env, monkeypatch)
        elif block.kind == "yaml":
            _yaml(block, root)
        else:
            _outputs(block, root)
    if cells:
        asyncio.run(_cells(cells))


async def _cells(cells: list[tuple[Block, str]]) -> None:
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    for block, body in cells:
        code = compile(body, block.where, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        result = eval(code, namespace)  # noqa: S307 - our own documentation
        if asyncio.iscoroutine(result):
            await result


def _commands(body: str) -> Iterator[str]:
    """The block's command lines: comments dropped, ``\\`` continuations joined, a leading ``$ `` prompt removed."""
    pending = ""
    for raw in body.splitlines():
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line.startswith("$ "):
            line = line[2:]
        if line and not line.startswith("#"):
            yield line


def _is_install(line: str) -> bool:
    return re.match(r"^(python3? -m )?pip install ", line) is not None


def _shell(block: Block, env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = {0, *(int(code) for code in re.findall(r"\d+", block.markers.get("exit", "")))}
    for line in _commands(block.body):
        if _is_install(line):
            continue  # listed by test_not_run_blocks_are_listed
        argv = shlex.split(line, comments=True)
        if argv[0] == "export":
            for assignment in argv[1:]:
                name, _, value = assignment.partition("=")
                if value != "...":
                    env[name] = value
                assert name in env, f"{block.where}: 'export {name}=...' has no stand-in in the doc-example sandbox"
            continue
        if argv[0] in ("python", "python3") and argv[1:3] != ["-m", "open_rag_eval"]:
            raise AssertionError(f"{block.where}: only open-rag-eval commands run here: {line!r} (mark the block "
                                 "<!-- not-run: REASON --> if it cannot run offline)")
        if argv[0] not in ("open-rag-eval", "python", "python3"):
            raise AssertionError(f"{block.where}: only open-rag-eval commands run here, not {argv[0]!r}: {line!r} "
                                 "(mark the block <!-- not-run: REASON --> if it cannot run offline)")
        args = argv[1:] if argv[0] == "open-rag-eval" else argv[3:]
        if args and args[0] in LONG_RUNNING:
            raise AssertionError(f"{block.where}: `{line}` runs until it is stopped: mark the block "
                                 "<!-- not-run: REASON --> and test the command in its own test")
        code = _cli(args, env, monkeypatch)
        assert code in allowed, f"{block.where}: `{line}` exited {code} (its output is in the captured log above)"
        if code == 0 and args[:1] == ["eval"]:
            _results_not_empty(block, line, args)


def _results_not_empty(block: Block, line: str, args: list[str]) -> None:
    """An ``eval`` that exited 0 wrote results with at least one row and one value (an empty table read as done
    once: a run file's rows lost, exit 0)."""
    import argparse

    from open_rag_eval.config import load_config
    from open_rag_eval.run.checks import output_folder

    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--config", "-c")
    parser.add_argument("-o", "--output", "--output-dir", dest="output_dir")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--shard")
    known, _ = parser.parse_known_args(args[1:])
    if known.dry_run or known.config is None or known.shard:
        return  # a shard folder holds records, not results: its merge is checked
    folder = Path(known.output_dir) if known.output_dir else output_folder(load_config(known.config))
    with (folder / "results.csv").open(newline="", encoding="utf-8") as handle:
        table = list(csv.DictReader(handle))
    assert table, f"{block.where}: `{line}` exited 0 but {folder}/results.csv has no row"
    with (folder / "summary.csv").open(newline="", encoding="utf-8") as handle:
        assert any(row.get("n") not in (None, "", "0") for row in csv.DictReader(handle)), \
            f"{block.where}: `{line}` exited 0 but no metric of {folder}/summary.csv has a value"


def _yaml(block: Block, root: Path) -> None:
    """Loaded over its base config (``<!-- base: PATH -->``, default the sandbox's ``base.yaml``): the block's
    sections replace the base's; a ``connector`` replaces the base's ``input``."""
    from open_rag_eval.config import load_config

    data = yaml.safe_load(block.body)
    assert isinstance(data, dict), f"{block.where}: a YAML example must be a mapping of config sections"
    base_path = root / block.markers.get("base", "base.yaml")
    merged = {**yaml.safe_load(base_path.read_text(encoding="utf-8")), **data}
    if "connector" in data:
        merged.pop("input", None)
    path = base_path.parent / f"doc-example-{block.doc.stem}-{block.line}.yaml"
    path.write_text(yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
    load_config(path)


def _outputs(block: Block, root: Path) -> None:
    from open_rag_eval.inputs import read_outputs

    suffix = ".csv" if block.kind == "csv" else ".jsonl"
    path = root / f"doc-example-{block.doc.stem}-{block.line}{suffix}"
    path.write_text(block.body, encoding="utf-8")
    outputs = read_outputs(path)
    assert outputs, f"{block.where}: no RAG outputs read"
