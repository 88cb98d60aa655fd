"""What a run does before its first judge request, and what waits until it is out.

The judge-health controls and numpy's import start once the judge has sent its first request (``judge.asked``),
beside the first stage, never before it; the controls take their outputs from the windows the evaluation reads
(``FirstOutputs``), the same outputs whatever the size of the windows."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.config import load_config
from open_rag_eval.core.types import RAGOutput
from open_rag_eval.judge.rehearsal import RehearsalJudge
from open_rag_eval.run import controls, evaluation, pipeline, start
from open_rag_eval.run.spill import Spill
from tests.test_run_windows import _config, _outputs


def _output(query_id: str, run: int) -> RAGOutput:
    return RAGOutput(query_id=query_id, query=f"What is {query_id}?", run=run, answer="An answer.")


def _first(windows: list[list[RAGOutput]], size: int, limit: int) -> list[RAGOutput] | None:
    async def main() -> list[RAGOutput] | None:
        first = start.FirstOutputs(limit)
        for window in windows:
            first.add(window, size)
        return first.ready.result() if first.ready.done() else None

    return asyncio.run(main())


def test_the_controls_outputs_are_the_first_whole_queries_that_fit_whatever_the_windows() -> None:
    outputs = [_output(f"q{q}", run) for q in range(6) for run in range(1, 2 + q % 2)]  # 1 or 2 runs: 9 outputs
    ids = [(o.query_id, o.run) for o in outputs]
    # the run's own windows (size >= limit): the first window is the answer at once
    assert [(o.query_id, o.run) for o in _first([outputs[:4]], 4, 4) or []] == ids[:4]  # q0 q1 q2 (1+2+1)
    # windows of 2 outputs: ready once the next query does not fit in 4 (q3's two runs would make 6)
    small = [outputs[:1], outputs[1:3], outputs[3:4], outputs[4:6]]
    assert _first(small[:3], 2, 4) is None  # q0 q1 q2 so far: q3 might still fit
    assert [(o.query_id, o.run) for o in _first(small, 2, 4) or []] == ids[:4]
    assert [(o.query_id, o.run) for o in _first([outputs[:2]], 9, 1) or []] == ids[:1]  # at least one query


def test_the_controls_start_once_the_first_judge_request_is_out(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path, "start", _outputs())
    seen: list[tuple[bool, int]] = []
    real = controls.run_controls_of  # imported by run.start once the first request is out

    def controls_of(evaluators: Any, outputs: Any, judge: Any, *args: Any) -> Any:
        seen.append((judge.asked.is_set(), len(outputs)))
        return real(evaluators, outputs, judge, *args)

    monkeypatch.setattr(controls, "run_controls_of", controls_of)
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", 5)
    report = pipeline.run(load_config(config))
    assert seen == [(True, 22)]  # after the first request; every output of a run smaller than CONTROL_OUTPUTS
    health = json.loads((report.output_dir / "manifest.json").read_text(encoding="utf-8"))["health"]
    assert health["controls"]["state"] == "run"


def test_a_run_that_sends_no_request_still_asks_its_controls(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path, "cached", _outputs())
    text = config.read_text(encoding="utf-8").replace("cache: false", f"cache: {tmp_path / 'cache.sqlite'}")
    config.write_text(text, encoding="utf-8")
    pipeline.run(load_config(config))  # fills the cache
    states: list[bool] = []
    real = controls.run_controls_of  # imported by run.start once the first request is out

    def controls_of(evaluators: Any, outputs: Any, judge: Any, *args: Any) -> Any:
        states.append(judge.asked.is_set())
        return real(evaluators, outputs, judge, *args)

    monkeypatch.setattr(controls, "run_controls_of", controls_of)
    report = pipeline.run(load_config(config))  # every judgment cached: the judge is never asked
    assert states == [False]
    health = json.loads((report.output_dir / "manifest.json").read_text(encoding="utf-8"))["health"]
    assert health["controls"]["state"] == "run"


def test_a_run_evaluated_as_one_window_asks_its_controls_beside_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path, "whole", _outputs(skipped=True))  # consistency skips q2 and q6: one window
    spilled: list[int] = []
    seen: list[int] = []
    real_add, real = Spill.add, controls.run_controls_of

    def add(self: Spill, outputs: Any, parts: Any) -> None:
        spilled.append(len(outputs))
        real_add(self, outputs, parts)

    def controls_of(evaluators: Any, outputs: Any, judge: Any, *args: Any) -> Any:
        if not isinstance(judge, RehearsalJudge):  # the run's controls, not the console plan's rehearsal of them
            seen.append(len(spilled))  # windows evaluated by then
        return real(evaluators, outputs, judge, *args)

    monkeypatch.setattr(Spill, "add", add)
    monkeypatch.setattr(controls, "run_controls_of", controls_of)
    pipeline.run(load_config(config))
    assert spilled == [20] and seen == [0]  # the one window: its controls while it was evaluated, not after


OFF_THE_PATH = """
import sys
from open_rag_eval.cli import register_sections
import open_rag_eval.cli.commands.eval, open_rag_eval.config, open_rag_eval.run.pipeline
register_sections()
print(sorted(m for m in sys.modules if m.startswith(("open_rag_eval.report", "open_rag_eval.diagnosis",
      "open_rag_eval.tracking", "open_rag_eval.ablation", "open_rag_eval.health.controls",
      "open_rag_eval.run.controls"))))
"""


def test_what_waits_for_the_first_request_is_not_imported_before_it() -> None:
    """`eval`'s way to its first judge request (its command, the config, the pipeline, the sections named) imports
    neither the report, the controls, nor the owners of config sections a run does not have: each waits until it
    is needed (docs/scaling.md, "Start-up")."""
    done = subprocess.run([sys.executable, "-c", OFF_THE_PATH], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
