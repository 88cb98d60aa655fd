"""Every malformed file in tests/data/bad/ through the real CLI: one error line naming the location and the problem,
the right exit code (2 config, 3 input), no traceback, no partial output.

Cases: the RAG-output and query files listed in ``inputs_cases.yaml`` (fed through ``input:`` or a connector's
``queries:``), TREC qrels/run files (through the golden evaluator), and the YAML configs ``config_*.yaml`` (run as
they are). The same table runs in-process (fast) and, behind ``slow``, as real subprocesses.
"""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from open_rag_eval.cli import main
from tests.test_golden_files import BAD_QRELS, BAD_RUNS

ROOT = Path(__file__).resolve().parent.parent
BAD = Path(__file__).resolve().parent / "data" / "bad"
GOOD_INPUT = BAD.parent / "peer_layout.csv"
GOOD_QRELS = ROOT / "configs" / "data" / "golden_trec_qrels.txt"
UNSET = ("OPEN_RAG_EVAL_FAULTS_UNSET", "OPEN_RAG_EVAL_FAULTS_UNSET_MODEL", "OPEN_RAG_EVAL_FAULTS_UNSET_KEY")


@dataclass(frozen=True)
class Case:
    file: str
    kind: str  # outputs | queries | qrels | run | config
    exit_code: int
    where: str  # what the error line starts with after "error: "
    fragment: str  # the problem, as the message words it

    @property
    def id(self) -> str:
        return self.file


def _input_cases() -> list[Case]:
    cases = []
    for entry in yaml.safe_load((BAD / "inputs_cases.yaml").read_text(encoding="utf-8")):
        where = str(BAD / entry["file"]) + (f":{entry['line']}" if entry["line"] is not None else "")
        if entry["field"]:
            where += f": field '{entry['field']}'"
        cases.append(Case(entry["file"], entry["reader"], entry["exit_code"], where, entry["message"]))
    return cases


_TREC_FILES = [*BAD_QRELS, *BAD_RUNS]  # file, line, field, problem


_MORE_INPUTS = [  # file, line, field, problem -- cases beyond inputs_cases.yaml
    ("newline_in_duplicate_id.jsonl", 1, "passages[1].id", "duplicate passage id 'x\\ny'"),  # stays one line
]


def _more_input_cases() -> list[Case]:
    return [Case(name, "outputs", 3, f"{BAD / name}:{line}: field '{field}'", problem)
            for name, line, field, problem in _MORE_INPUTS]


def _trec_cases() -> list[Case]:
    cases = []
    for name, line, field, problem in _TREC_FILES:
        where = str(BAD / name) + (f":{line}" if line is not None else "") + (f": field '{field}'" if field else "")
        cases.append(Case(name, name.split("_")[0], 3, where, problem))
    return cases


_CONFIGS = [  # file, exit code, location after the file name, problem
    ("config_unknown_key.yaml", 2, ": bogus_section", "unknown key; valid keys here: "),
    ("config_unknown_evaluator.yaml", 2, ": evaluators[0].type", "unknown evaluator 'telepathy'; valid choices:"),
    ("config_unknown_metric.yaml", 2, ": evaluators[0].metrics", "unknown metric(s) vibes; valid choices: umbrela"),
    ("config_unknown_evaluator_option.yaml", 2, ": evaluators[0].colour", "unknown key; valid keys here: alpha"),
    ("config_unknown_judge_key.yaml", 2, ": judge.temperature", "unknown key; valid keys here:"),
    ("config_unknown_connector.yaml", 2, ": connector.type", "unknown connector 'carrier_pigeon'"),
    ("config_unset_env.yaml", 2, ": input", "environment variable OPEN_RAG_EVAL_FAULTS_UNSET is not set"),
    ("config_unset_env_peer_spelling.yaml", 2, ": judge.model",
     "environment variable OPEN_RAG_EVAL_FAULTS_UNSET_MODEL is not set"),
    ("config_wrong_type.yaml", 2, ": judge.max_concurrency", "Input should be a valid integer"),
    ("config_out_of_range.yaml", 2, ": judge.simulated.error_rate", "less than or equal to 1"),
    ("config_bad_k_values.yaml", 2, ": evaluators[0].k_values", "positive integers"),
    ("config_invalid_yaml.yaml", 2, ":2", "invalid YAML: expected ',' or ']'"),
    ("config_tab_indent.yaml", 2, ":3", "invalid YAML: found character '\\t'"),
    ("config_duplicate_key.yaml", 2, ":2", "invalid YAML: duplicate key 'input'"),
    ("config_not_mapping.yaml", 2, "", "a config must be a YAML mapping"),
    ("config_empty.yaml", 2, "", "a config must be a YAML mapping"),
    ("config_binary.yaml", 2, "", "config is not UTF-8 text"),
    ("config_bad_utf8.yaml", 2, "", "config is not UTF-8 text"),
    ("config_missing_evaluators.yaml", 2, ": evaluators", "Field required"),
    ("config_empty_evaluators.yaml", 2, ": evaluators", "at least 1 item"),
    ("config_evaluator_without_type.yaml", 2, ": evaluators[0]", "missing 'type'"),
    ("config_input_and_connector.yaml", 2, ": connector", "give either input or connector, not both"),
    ("config_run_without_qrels.yaml", 2, ": evaluators[0]", "'run' needs 'qrels'"),
    ("config_peer_literal_key.yaml", 2, ": evaluator[0].model.api_key", "write the API key as ${oc.env:NAME}"),
    ("config_missing_api_key.yaml", 2, ": judge.api_key_env",
     "set the environment variable OPEN_RAG_EVAL_FAULTS_UNSET_KEY"),
    ("config_missing_input_file.yaml", 3, "", "cannot read the file"),
]


def _config_cases() -> list[Case]:
    cases = []
    for name, code, where, problem in _CONFIGS:
        located = str(BAD / "no_such_answers.csv") if name == "config_missing_input_file.yaml" else str(BAD / name)
        cases.append(Case(name, "config", code, located + where, problem))
    return cases


CASES = _input_cases() + _more_input_cases() + _trec_cases() + _config_cases()


def _config_for(case: Case, folder: Path) -> Path:
    """The config that feeds the malformed file to the CLI (a config case is its own config)."""
    if case.kind == "config":
        return BAD / case.file
    bad = str(BAD / case.file)
    config: dict[str, object] = {"input": str(GOOD_INPUT), "evaluators": [{"type": "golden", "k_values": [1]}]}
    if case.kind == "outputs":
        config["input"] = bad
    elif case.kind == "queries":
        del config["input"]
        config["connector"] = {"type": "http", "queries": bad, "options": {"url": "http://127.0.0.1:9/q"}}
    elif case.kind == "qrels":
        config["evaluators"] = [{"type": "golden", "k_values": [1], "qrels": bad}]
    else:
        config["evaluators"] = [{"type": "golden", "k_values": [1], "run": bad, "qrels": str(GOOD_QRELS)}]
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _check(case: Case, code: int, lines: list[str], out: Path) -> None:
    assert code == case.exit_code, lines
    assert len(lines) == 1, lines
    line = lines[0]
    assert line.startswith(f"error: {case.where}"), line
    assert case.fragment in line, line
    assert "Traceback" not in line and "\n" not in line
    assert not out.exists(), f"partial output: {sorted(p.name for p in out.iterdir())}"


def test_corpus_size_and_coverage() -> None:
    names = [case.file for case in CASES]
    assert len(names) == len(set(names)) >= 93
    kinds = {kind: sum(1 for c in CASES if c.kind == kind) for kind in ("outputs", "queries", "qrels", "run", "config")}
    assert kinds == {"outputs": 52, "queries": 6, "qrels": 5, "run": 6, "config": 26}
    on_disk = {p.name for p in BAD.iterdir() if p.name != "inputs_cases.yaml"}
    assert on_disk == set(names)  # every file in the folder is a case, every case a file


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_file_in_process(case: Case, tmp_path: Path, caplog: pytest.LogCaptureFixture,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    out = tmp_path / "out"
    config = _config_for(case, tmp_path)
    with caplog.at_level("INFO"):
        code = main(["-q", "eval", "--config", str(config), "--output-dir", str(out)])
    lines = [r.getMessage() for r in caplog.records if r.levelno >= 30]
    _check(case, code, lines, out)


def _subprocess(case: Case, folder: Path) -> tuple[int, list[str], str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    config = _config_for(case, folder)
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "-q", "eval", "--config", str(config),
                           "--output-dir", str(folder / "out")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stderr.splitlines(), done.stdout


@pytest.mark.slow
def test_bad_files_as_real_processes(tmp_path: Path) -> None:
    """Every third case (all kinds) as a real process: stderr is exactly the one line, stdout is empty."""
    sample = CASES[::3]
    assert {case.kind for case in sample} == {"outputs", "queries", "qrels", "run", "config"}
    folders = [tmp_path / f"case{i}" for i in range(len(sample))]
    for folder in folders:
        folder.mkdir()
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(_subprocess, sample, folders))
    for case, folder, (code, lines, stdout) in zip(sample, folders, results):
        assert stdout == "", (case.file, stdout)
        _check(case, code, lines, folder / "out")
