"""The eval command's start: Python's cyclic collector is off while its modules and config load, and in the
program's own process what was loaded is then frozen out of the collector's sight (``cli.loading``); the program
skips pydantic's plugin lookup (``cli.PLUGINS_OFF``)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from open_rag_eval.cli import loading


def test_loading_turns_the_collector_off_and_back_on_without_freezing_a_shared_process() -> None:
    frozen = gc.get_freeze_count()
    assert gc.isenabled()
    with loading(False):
        assert not gc.isenabled()
    assert gc.isenabled() and gc.get_freeze_count() == frozen
    with pytest.raises(ValueError), loading(False):
        raise ValueError("a bad config")
    assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_loading_leaves_a_collector_turned_off_by_its_caller_off() -> None:
    gc.disable()
    try:
        with loading(False):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


PROGRAM = """
import atexit, gc, json, os, sys
from open_rag_eval.cli import main

atexit.register(lambda: print(json.dumps({"frozen": gc.get_freeze_count(), "enabled": gc.isenabled(),
                                          "plugins": os.environ.get("PYDANTIC_DISABLE_PLUGINS")})))
sys.argv = ["open-rag-eval", "-q", "eval", "--config", sys.argv[1]]
main()
"""


def test_the_programs_eval_freezes_what_it_loaded_and_collects_again(tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text(
        "query_id,query,query_run,passage_id,passage,generated_answer\n"
        "q1,what is tea?,1,[1],Tea is a drink made from leaves.,Tea is a drink [1].\n", encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text("input: data.csv\noutput_dir: out\njudge:\n  model: simulated-judge\n  simulated: {}\n"
                      "  cache: false\nevaluators:\n  - type: trec\n    metrics: [umbrela]\n", encoding="utf-8")
    env = {name: value for name, value in os.environ.items() if name != "PYDANTIC_DISABLE_PLUGINS"}
    env = {**env, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                         os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROGRAM), str(config)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    state = json.loads(done.stdout.strip().splitlines()[-1])
    assert state["enabled"] and state["frozen"] > 10_000  # the modules, classes and schemas loaded before the run
    assert state["plugins"] == "__all__"  # pydantic's plugin lookup skipped: the program's own process
    assert (tmp_path / "out" / "results.csv").is_file()
