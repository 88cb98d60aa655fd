"""A metric whose judge task is unhealthy is never shown as meeting its target (docs/judge-health.md): the report's
card, the console's headline row and ``plot`` say "judge unhealthy", and the coverage line counts the outputs
resting on that task apart. The simulated judge's demo keeps its verdicts."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.health.rests import on_unhealthy, tasks_of, unhealthy_metrics, unhealthy_tasks
from tests.openai_server import Reply, ScriptedServer

DEMO = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"


def _constant(body: dict[str, Any]) -> Reply:
    """The small real model's one answer per task: every passage 2, every citation No Support, every answer no."""
    user = body["messages"][-1]["content"]
    if "Statement:" in user:
        return Reply.ok("No Support")
    if "score on an integer scale of 0 to 3" in user:
        return Reply.ok("##final score: 2")
    if "attempt to answer the query" in user:
        return Reply.ok("no")
    return Reply.error(400, "not a task of this test")


def _eval(tmp_path: Path, base_url: str, model: str, *flags: str) -> tuple[int, Path]:
    config = tmp_path / "c.yaml"
    config.write_text(f"input: {DEMO}\noutput_dir: out\njudge:\n  model: {model}\n  base_url: {base_url}\n"
                      "  cache: false\n  max_retries: 0\nevaluators:\n  - type: trec\n"
                      "    metrics: [umbrela, citation, no_answer]\n", encoding="utf-8")
    return main(["eval", "--config", str(config), *flags]), tmp_path / "out"


def _card(html: str, metric: str) -> str:
    start = html.index(f'data-metric="{metric}" data-status')
    return html[start:html.index("</div></div>", start)]


def _headline_row(printed: str, metric: str) -> str:
    lines = printed.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("headline ("))
    return next(line for line in lines[start:] if line.strip().startswith(f"{metric} ")).rstrip()


def test_the_metric_names_its_judge_tasks() -> None:
    assert tasks_of("umbrela.mean") == ("umbrela",)
    assert tasks_of("nuggets.vital_strict") == ("nugget_create", "nugget_importance", "nugget_assign")
    assert tasks_of("criteria.polite") == ("criteria.polite", "criteria", "criteria_steps")
    assert tasks_of("golden.ndcg@10") == () and tasks_of("latency.ms") == ()
    assert on_unhealthy("citation.f1", ["umbrela", "support"]) == ["support"]


def test_unhealthy_tasks_of_a_manifest_old_and_new() -> None:
    assert unhealthy_tasks(None) == [] and unhealthy_tasks({"healthy": True, "unhealthy_tasks": ["umbrela"]}) == []
    assert unhealthy_tasks({"healthy": False, "unhealthy_tasks": ["support"]}) == ["support"]
    old = {"healthy": False, "problems": ["umbrela: controls failed: 0 of 5", "context_useful: controls failed"],
           "tasks": {"umbrela": {}, "support": {}}, "controls": {"tasks": {"context_useful": {}}}}
    assert unhealthy_tasks(old) == ["umbrela", "context_useful"]
    assert unhealthy_metrics(["umbrela.mean", "citation.f1", "context.precision"], old) == {
        "umbrela.mean": ["umbrela"], "context.precision": ["context_useful"]}


def test_a_constant_judge_is_never_met_nor_green(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedServer(responder=_constant) as server:
        code, out = _eval(tmp_path, server.base_url, "constant", "--strict-judge")
    assert code == 6
    printed = capsys.readouterr().out
    row = _headline_row(printed, "umbrela.mean")
    assert not row.endswith("met") and row.endswith("target ≥ 1.5: judge unhealthy (umbrela)"), row
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["health"]["unhealthy_tasks"] == ["umbrela", "support", "no_answer"]
    html = (out / "report.html").read_text(encoding="utf-8")
    card = _card(html, "umbrela.mean")
    assert 'data-status="unhealthy"' in card and "judge unhealthy" in card and "good" not in card
    coverage = html[html.index('id="coverage"'):]
    coverage = coverage[:coverage.index("</dd>")]
    found = re.search(r"/ (\d+) outputs", coverage)
    assert found is not None
    n = int(found[1])
    assert f"0 / {n} outputs fully scored on a healthy judge" in coverage
    assert f'data-unhealthy="{n}"' in coverage and "umbrela, support, no_answer" in coverage
    assert "outputs fully scored<br>" not in coverage
    line = next(line for line in printed.splitlines() if line.startswith("coverage: "))  # the console says the same
    assert line.startswith(f"coverage: 0 / {n} outputs fully scored on a healthy judge ({n} hold values from an "
                           "unhealthy judge task, umbrela, support, no_answer: counted apart)"), line


def test_plot_says_judge_unhealthy_on_the_box(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib (the plot extra)")
    import matplotlib.pyplot as plt

    from open_rag_eval.report import plots
    from open_rag_eval.report.loader import load_results

    with ScriptedServer(responder=_constant) as server:
        _, out = _eval(tmp_path, server.base_url, "constant")
    results = load_results(out)
    fig, ax = plt.subplots()
    plots._box_panel(ax, "umbrela.mean", [results])
    [label] = [t.get_text() for t in ax.get_xticklabels()]
    assert label.startswith("mean 2.00") and label.endswith("judge unhealthy (umbrela)")
    plt.close(fig)


def test_the_simulated_demo_keeps_its_verdicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

    with SimulatedJudgeServer(SimulatedServerConfig(noise_rate=0.1, seed=3)) as server:
        code, out = _eval(tmp_path, server.base_url, "simulated-judge", "--strict-judge")
    assert code == 0
    printed = capsys.readouterr().out
    assert "judge unhealthy" not in printed
    assert re.search(r"target ≥ 1\.5: (met|near|below)$", _headline_row(printed, "umbrela.mean"))
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'data-status="unhealthy"' not in html and "outputs fully scored<br>" in html
