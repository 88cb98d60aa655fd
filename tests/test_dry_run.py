"""--dry-run accuracy: the planned calls and prompt tokens of three configs against what the run really sent
(the simulated judge's accounting in the manifest), and the plan's per-task table and re-ask bound."""

from __future__ import annotations

import re

from pathlib import Path
from typing import Any

import pytest
import yaml

from open_rag_eval.run import pipeline, planning
from open_rag_eval.cli import main
from open_rag_eval.config import load_config

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs"
DATA = CONFIGS / "data"
EXACT = ("umbrela", "support", "no_answer")  # no estimate involved: the plan must count these exactly


def _simulated(config: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    config["judge"] = {"model": "simulated-judge", "cache": str(tmp_path / "cache.sqlite"),
                       "simulated": {"latency_ms": 0, "jitter_ms": 0,
                                     **(config.get("judge", {}).get("simulated") or {})}}
    config["output_dir"] = str(tmp_path / "out")
    config["input"] = str((CONFIGS / config["input"]).resolve())
    return config


def _demo(tmp_path: Path) -> dict[str, Any]:
    return _simulated(yaml.safe_load((CONFIGS / "demo.yaml").read_text()), tmp_path)


def _consistency(tmp_path: Path) -> dict[str, Any]:
    config = _simulated(yaml.safe_load((CONFIGS / "consistency.yaml").read_text()), tmp_path)
    config["evaluators"][1]["metrics"] = ["rouge", "dispersion"]  # BERTScore makes no judge call
    return config


def _samples_contexts(tmp_path: Path) -> dict[str, Any]:
    """UMBRELA samples, every citation judged, test-retest, the list-of-contexts input layout."""
    config = {"input": "data/demo.csv", "evaluators": [
        {"type": "trec", "k_values": [1, 3], "metrics": ["umbrela", "nuggets", "citation"],
         "umbrela": {"samples": 3}, "citation": {"variant": "all_citations"}},
        {"type": "consistency", "metrics": ["rouge"], "judge_repeats": 2}]}
    config = _simulated(config, tmp_path)
    outputs = pipeline.load_outputs(load_config(_write(tmp_path, "probe.yaml", config)))
    rows = ["query_id,query_run,query,answer,contexts,context_ids"]
    for o in outputs:
        contexts = [p.text for p in o.passages]
        rows.append(",".join(_cell(v) for v in (o.query_id, str(o.run), o.query, o.answer_text,
                                                 _json(contexts), ";".join(p.id for p in o.passages))))
    contexts_csv = tmp_path / "contexts.csv"
    contexts_csv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    config["input"] = str(contexts_csv)
    return config


def _json(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False)


def _cell(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def _write(tmp_path: Path, name: str, config: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.parametrize("make", [_demo, _consistency, _samples_contexts],
                         ids=["demo", "consistency", "samples-contexts"])
def test_planned_calls_and_prompt_tokens_within_ten_percent_of_the_run(tmp_path: Path, make: Any) -> None:
    loaded = load_config(_write(tmp_path, "config.yaml", make(tmp_path)))
    outputs = pipeline.load_outputs(loaded)
    plan = pipeline.plan(loaded, outputs)
    report = pipeline.run(loaded)
    real = report.manifest["accounting"]
    planned, total = plan.by_task(), plan.total()
    assert abs(total.calls - real["total"]["calls"]) <= 0.10 * real["total"]["calls"], (planned, real)
    assert abs(total.prompt_tokens - real["total"]["prompt_tokens"]) <= 0.10 * real["total"]["prompt_tokens"]
    for task in EXACT:
        if task in real["tasks"]:
            assert planned[task].calls == real["tasks"][task]["calls"], task
            assert planned[task].prompt_tokens == real["tasks"][task]["prompt_tokens"], task
    assert set(planned) == set(real["tasks"])  # every task the run used was planned, and no other
    assert real["total"]["retries"] == 0 and real["total"]["failures"] == 0


def test_without_a_cache_the_run_sends_what_the_dry_run_plans(tmp_path: Path) -> None:
    """cache: false keeps nothing on disk, yet one run still asks each identical request once: test-retest's
    sample 0 is the evaluator's own judgment, not a second call (which made 18% more calls than planned)."""
    config = _demo(tmp_path)
    config["judge"]["cache"] = False
    loaded = load_config(_write(tmp_path, "config.yaml", config))
    plan = pipeline.plan(loaded, pipeline.load_outputs(loaded))
    real = pipeline.run(loaded).manifest["accounting"]
    for task in EXACT:
        assert plan.by_task()[task].calls == real["tasks"][task]["calls"], task
    assert abs(plan.total().calls - real["total"]["calls"]) <= 0.10 * real["total"]["calls"]
    assert not (tmp_path / ".open-rag-eval").exists() and not list(tmp_path.rglob("*.sqlite"))


def test_retest_repeats_are_in_the_plan(tmp_path: Path) -> None:
    config = _demo(tmp_path)
    without = _demo(tmp_path)
    without["evaluators"] = without["evaluators"][:1]
    with_retest = pipeline.plan(load_config(_write(tmp_path, "a.yaml", config)),
                                pipeline.load_outputs(load_config(_write(tmp_path, "a.yaml", config))))
    plain = pipeline.plan(load_config(_write(tmp_path, "b.yaml", without)),
                          pipeline.load_outputs(load_config(_write(tmp_path, "b.yaml", without))))
    # judge_repeats 3: two more samples of every UMBRELA grade (30 pooled passages), citation, assignment, no-answer
    # the judge-health controls (10 UMBRELA calls, 5 no-answer calls beyond the metric's own) are asked once
    assert with_retest.by_task()["umbrela"].calls - 10 == 3 * (plain.by_task()["umbrela"].calls - 10) == 90
    assert with_retest.by_task()["no_answer"].calls - 5 == 3 * 11
    assert with_retest.by_task()["nugget_create"].calls == plain.by_task()["nugget_create"].calls  # lists reused


def test_dry_run_prints_tasks_reasks_and_cost(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _demo(tmp_path)
    config["judge"] = {"model": "gpt-4o", "api_key_env": "NO_SUCH_KEY_VARIABLE", "cache": False}
    assert main(["eval", "--config", str(_write(tmp_path, "c.yaml", config)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    # trec 246 + generation 136 + its rubric judges 50 (5 per output but citation accuracy where nothing is cited,
    # and only coherence for the one refusal; identical prompts once) + answer relevance 22 (questions and rating,
    # 11 outputs); answer similarity makes no judge call (and a dry run loads no embedding model); + the judge-health
    # controls 40 (5 pairs of UMBRELA, support, no-answer, nugget assignment and context usefulness; the no-answer
    # control on a system's answer is the metric's own request, and a nugget pair is one request) + the demo's two
    # criteria, one call each per output (22), and their controls (20: 5 pairs each, the system's answer against
    # another question's, without citation markers)
    assert "planned judge calls: 536 (identical requests once; before cache hits)" in out
    assert re.search(r"criteria\s+42 calls", out), out
    assert "  umbrela" in out and "100 calls" in out  # 3 x 30 grades (test-retest) + 10 controls
    # (388 before the controls; their 5 nugget-assignment calls may be re-asked 4 times each, their 10 context
    # usefulness calls once each)
    # + 22 criteria re-asks, + 20 for their controls
    assert "re-asks: none planned; replies that do not parse add at most 460 calls" in out
    assert "estimated cost with gpt-4o: $" in out and "with every re-ask)" in out
    assert not (tmp_path / "out").exists()


def test_expected_replies_parse_and_size_nugget_lists() -> None:
    from open_rag_eval.judge.base import JudgeRequest
    from open_rag_eval.judge.rehearsal import expected_reply
    from open_rag_eval.core.parsing import parse_labels, parse_list, parse_no_answer, parse_support, parse_umbrela

    def created(initial: int) -> int:
        user = f"Context:\n[1] a\n[2] b\n[3] c\nInitial Nugget List Length: {initial}\nhas at most 30 nuggets"
        return len(parse_list(expected_reply(JudgeRequest.chat("nugget_create", user))) or [])

    assert created(0) == 3 and created(20) == 23 and created(28) == 30  # one per passage, capped by the prompt
    assign = JudgeRequest.chat("nugget_assign", "label each of the 7 nuggets either as support")
    assert parse_labels(expected_reply(assign), 7) == ["partial_support"] * 7
    assert parse_umbrela(expected_reply(JudgeRequest.chat("umbrela", "Passage: x"))) == (2, True)
    assert parse_umbrela(expected_reply(JudgeRequest.chat("umbrela", "…\nExplanation:"))) == (2, True)
    assert parse_support(expected_reply(JudgeRequest.chat("support", "x"))) == "FS"
    assert parse_no_answer(expected_reply(JudgeRequest.chat("no_answer", "x"))) == "yes"


def test_dry_run_of_a_connector_config_says_why_nothing_is_planned(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "queries.csv").write_text("query\nWhy?\n", encoding="utf-8")
    config = {"output_dir": str(tmp_path / "out"),
              "connector": {"type": "http", "queries": "queries.csv", "repeats": 2,
                            "options": {"url": "http://127.0.0.1:9/q"}},
              "evaluators": [{"type": "golden", "metrics": ["lexical"]}]}
    assert main(["eval", "--config", str(_write(tmp_path, "c.yaml", config)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "the outputs come from the connector when the run queries the system (2 run(s) per query" in out


def test_a_large_input_is_planned_on_a_sample_of_queries_and_scaled(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    loaded = load_config(_write(tmp_path, "c.yaml", _demo(tmp_path)))
    base = pipeline.load_outputs(loaded)
    outputs = [o.model_copy(update={"query_id": f"{o.query_id}-{i}", "query": f"{o.query} ({i})"})
               for i in range(8) for o in base]  # 48 distinct queries
    full = pipeline.plan(loaded, outputs)
    monkeypatch.setattr(planning, "REHEARSED_QUERIES", 12)
    sampled = pipeline.plan(loaded, outputs)
    assert sampled.notes[0].startswith("planned on a random sample of 12 of the 48 queries (seed 0, ")
    assert sampled.scale > 2 and len(sampled.requests) < len(full.requests) / 2
    for name in ("calls", "prompt_tokens"):
        exact, estimate = getattr(full.total(), name), getattr(sampled.total(), name)
        assert abs(estimate - exact) <= 0.10 * exact, (name, estimate, exact)


def test_expected_reasks_come_from_the_last_run_of_the_same_model(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from open_rag_eval.cli.console import measured_reask_rates

    config = _demo(tmp_path)
    config["evaluators"] = config["evaluators"][:1]
    config["evaluators"][0]["metrics"] = ["umbrela", "nuggets", "no_answer"]
    config["judge"]["simulated"]["malformed_rate"] = 0.3  # unparseable replies: nugget tasks re-ask
    path = _write(tmp_path, "c.yaml", config)
    assert main(["eval", "--config", str(path), "--dry-run"]) == 0
    assert "expected re-asks" not in capsys.readouterr().out  # no earlier run: nothing measured
    pipeline.run(load_config(path))
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    rates = measured_reask_rates(tmp_path / "out" / "manifest.json", "simulated-judge")
    assert rates is not None and rates["nugget_assign"] > 0 and rates["umbrela"] == 0.0
    row = manifest["health"]["tasks"]["nugget_assign"]
    assert rates["nugget_assign"] == (row["replies"] - row["judgments"]) / row["judgments"]
    assert measured_reask_rates(tmp_path / "out" / "manifest.json", "gpt-4o") is None  # another model: no rates
    capsys.readouterr()
    assert main(["eval", "--config", str(path), "--dry-run"]) == 0
    out = capsys.readouterr().out
    loaded = load_config(path)
    expected = pipeline.plan(loaded, pipeline.load_outputs(loaded)).expected_reasks(rates)
    assert expected.calls > 0
    assert (f"expected re-asks: {expected.calls} calls, {expected.prompt_tokens} prompt tokens, at the rates "
            "simulated-judge needed in the last run in out/") in out
