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
from tests.openai_server import Reply, ScriptedServer, constant_small_model

DEMO = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"


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
    with ScriptedServer(responder=constant_small_model) as server:
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

    with ScriptedServer(responder=constant_small_model) as server:
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


# -- control items that are independent tests ------------------------------------------------------------------

_TOPICS = [("q1", "Why is the sky blue?", "air scatters blue light strongly", "Rayleigh scattering by air molecules",
            "sunsets look red near the horizon"),
           ("q2", "What causes the seasons on Earth?", "the tilt of the axis matters", "each hemisphere leans to the "
            "Sun", "summer days are longer than winter days"),
           ("q3", "How do vaccines work?", "vaccines train the immune system", "memory cells remain afterwards",
            "boosters refresh waning antibody levels"),
           ("q4", "Why do cats purr?", "cats purr with their larynx muscles", "purring also helps bones heal",
            "kittens purr while nursing"),
           ("q5", "How are volcanoes formed?", "magma rises through the crust", "plates meet at subduction zones",
            "hotspots build island chains"),
           ("q6", "What is photosynthesis?", "plants turn light into sugar", "chlorophyll absorbs red light",
            "oxygen escapes through leaf pores")]


def _six_queries() -> list[Any]:
    from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput

    outputs = []
    for qid, query, first, second, third in _TOPICS:
        passages = [Passage(id=f"{qid}-p{j}", text=f"{fact[0].upper()}{fact[1:]} indeed. {fact}!")
                    for j, fact in enumerate((first, second, third))]
        if qid == "q6":
            passages.append(Passage(id="tiny", text="Zebra."))  # the shortest passage, sharing no word with any
        outputs.append(RAGOutput(query_id=qid, query=query, passages=tuple(passages),
                                 answer=(AnswerPart(text=f"The answer is that {first}. Also {second}."),)))
    return outputs


def test_the_low_items_of_a_run_never_share_a_passage_while_others_are_free() -> None:
    from open_rag_eval.health.controls import build_controls, detail, Outcome

    controls = build_controls(_six_queries(), ["umbrela", "support", "nugget_assign"], pairs=5)
    low = [c for c in controls if c.expect == "low"]
    assert len(low) == 15 and all(c.source is not None for c in low)
    sources = [c.source for c in low]
    assert len(set(sources)) == 15  # 19 passages: no low item reuses one (the old rule took 'tiny' for most)
    assert sum(1 for s in sources if s == ("q6", "tiny")) <= 1
    assert all(c.source is not None and c.source[0] != c.query_id for c in low)  # always another query's passage
    for task in ("umbrela", "support", "nugget_assign"):  # within a task, each pair's low item from another query
        queries = [c.source[0] for c in low if c.task == task and c.source is not None]
        assert len(set(queries)) == 5, (task, queries)
    listed = detail([Outcome(c, None, "not asked") for c in controls])
    assert {"query_id": "q6", "passage_id": "tiny"} in [row.get("source") for row in listed] or ("q6", "tiny") not in sources
    assert all("source" in row for row in listed if row["expect"] == "low")


def test_with_one_free_passage_left_the_least_related_is_reused() -> None:
    from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput
    from open_rag_eval.health.controls import build_controls

    two = [RAGOutput(query_id=q, query=text, passages=(Passage(id="p", text=passage),),
                     answer=(AnswerPart(text=answer),))
           for q, text, passage, answer in (
               ("a", "Why is the sky blue?", "Air scatters blue light more than red light here.", "Air scatters it."),
               ("b", "How do vaccines work?", "Vaccines train the immune system with an antigen.", "They train it."))]
    controls = build_controls(two, ["umbrela", "support"], pairs=5)
    low = [c for c in controls if c.expect == "low"]
    assert [c.source for c in low] == [("b", "p"), ("a", "p"), ("b", "p"), ("a", "p")]  # only two passages exist


# -- criteria: controls and health per criterion -----------------------------------------------------------------

def _criteria_run(tmp_path: Path, base_url: str, *flags: str, criteria: str = "") -> tuple[int, Path]:
    config = tmp_path / "criteria.yaml"
    config.write_text(
        f"input: {DEMO}\noutput_dir: out\njudge:\n  model: constant\n  base_url: {base_url}\n  cache: false\n"
        "  max_retries: 0\nevaluators:\n  - type: criteria\n    criteria:\n"
        + (criteria or "      - {name: clear, question: 'Is the answer clear and on the question?', scale: 1-5}\n"
                       "      - {name: cites, question: 'Does the answer cite its sources?'}\n"),
        encoding="utf-8")
    return main(["eval", "--config", str(config), *flags]), tmp_path / "out"


def _criterion_constant(body: dict[str, Any]) -> Reply:
    """Grade 3 to every answer on the 1-5 criterion; the yes/no one answered by whether the answer shares a long
    word with the question (a judge that tells an answer to the question from an answer to another one)."""
    user = body["messages"][-1]["content"]
    if "Criterion (clear)" in user:
        return Reply.ok(json.dumps({"reason": "fine", "score": 3}))
    question = user.split("Question:", 1)[1].split("\n", 1)[0]
    answer = user.split("Answer:", 1)[1].split("\n\n", 1)[0].lower()
    on_topic = any(w.lower().strip("?") in answer for w in question.split() if len(w.strip("?")) > 5)
    return Reply.ok(json.dumps({"reason": "checked", "score": "yes" if on_topic else "no"}))


def test_a_constant_criterion_is_flagged_and_its_own_health_row(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    with ScriptedServer(responder=_criterion_constant) as server:
        code, out = _eval_criteria(tmp_path, server.base_url)
    health = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["health"]
    assert code == 6  # --strict-judge: the constant criterion's controls failed
    rows = health["tasks"]
    assert set(rows) >= {"criteria.clear", "criteria.cites"} and "criteria" not in rows  # not pooled
    assert rows["criteria.clear"]["labels"] == {"3": rows["criteria.clear"]["n_labels"]}
    controls = health["controls"]["tasks"]
    assert controls["criteria.clear"]["verdict"] == "fail" and controls["criteria.clear"]["told_apart"] == 0
    assert controls["criteria.clear"]["labels"] == {"high": {"3": 5}, "low": {"3": 5}}
    assert health["unhealthy_tasks"] == ["criteria.clear"]
    assert controls["criteria.cites"]["verdict"] != "fail" and controls["criteria.cites"]["told_apart"] >= 1
    assert any(p.startswith("criteria.clear: controls failed: 0 of 5 pairs told apart") for p in health["problems"])
    assert "! criteria.clear: controls failed" in capsys.readouterr().out
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "criteria.clear: fail -- 0 of 5 pairs told apart" in html


def _eval_criteria(tmp_path: Path, base_url: str) -> tuple[int, Path]:
    return _criteria_run(tmp_path, base_url, "--strict-judge")


def test_the_diagnosis_doubts_a_criterion_hint_whose_own_task_is_unhealthy() -> None:
    from open_rag_eval.diagnosis import diagnose

    health = {"healthy": False, "unhealthy_tasks": ["criteria.clear"], "problems": ["criteria.clear: controls failed"]}
    found = diagnose({"criteria.clear": 0.1, "criteria.cites": 0.2}, health=health)
    notes = {f.text.split("(")[1].split(" =")[0]: f.uncertain for f in found.findings if "criteria." in f.text}
    assert notes == {"criteria.cites": "", "criteria.clear": "uncertain: the judge's criteria.clear replies are unhealthy"}
    assert found.judge is not None and "criteria.clear" in found.judge


def test_the_comparison_report_never_colours_a_sick_run_green(tmp_path: Path) -> None:
    import shutil

    with ScriptedServer(responder=constant_small_model) as server:
        _, out = _eval(tmp_path, server.base_url, "constant")
    shutil.copytree(out, tmp_path / "again")
    page_path = tmp_path / "cmp.html"
    assert main(["report", str(out), str(tmp_path / "again"), "-o", str(page_path)]) == 0
    page = page_path.read_text(encoding="utf-8")
    row = page[page.index('<tr data-metric="umbrela.mean"><td><span class="mname">'):]
    row = row[:row.index("</tr>")]
    assert row.count('class="cmp unhealthy"') == 2 and 'class="cmp good"' not in row
    assert row.count("judge unhealthy (umbrela)") == 2


def test_a_criterion_s_health_rows_are_declared_columns() -> None:
    from open_rag_eval.core.catalogue import column

    for name in ("clean_rate", "failed_rate", "top_label_share", "label_entropy", "controls_told_apart"):
        assert column(f"health.criteria.clear.{name}") is not None, name
    assert column("health.anything.else.clean_rate") is None
