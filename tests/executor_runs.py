"""Shared by the executor tests: one config over the bundled demo outputs, run locally, on Ray or in shards."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

DEMO = Path(__file__).parent.parent / "configs" / "data" / "demo.csv"
RESULT_FILES = ("results.csv", "summary.csv", "results.json")


def write_config(folder: Path, name: str, *, base_url: str | list[str] | None = None, hhem: Path | None = None,
                 consistency: bool = True, executor: dict[str, Any] | None = None, judge: dict[str, Any] | None = None,
                 metrics: tuple[str, ...] = ("umbrela", "nuggets", "citation", "no_answer")) -> Path:
    """``folder/name.yaml`` (JSON is YAML) evaluating the demo outputs into ``folder/name`` with its own cache
    (``base_url`` a list: ``judge.base_urls``)."""
    if not (folder / "demo.csv").exists():
        shutil.copy(DEMO, folder / "demo.csv")
    trec: dict[str, Any] = {"type": "trec", "k_values": [1, 3], "metrics": list(metrics)}
    if hhem is not None:
        trec["metrics"].append("hhem")
        trec["hallucination"] = {"model_path": str(hhem), "device": "cpu"}
    evaluators = [trec]
    if consistency:
        evaluators.append({"type": "consistency", "metrics": ["rouge", "bertscore", "dispersion"], "judge_repeats": 2})
    source = {"base_urls" if isinstance(base_url, list) else "base_url": base_url} if base_url \
        else {"simulated": {"latency_ms": 1}}
    config = {"input": "demo.csv", "output_dir": name,
              # the judge-health controls on: every executor asks them once, as the local run does
              "judge": {"model": "simulated-judge", "cache": f"{name}-cache.sqlite", **source, **(judge or {})},
              "evaluators": evaluators}
    if executor is not None:
        config["executor"] = executor
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def result_bytes(folder: Path) -> dict[str, bytes]:
    return {name: (folder / name).read_bytes() for name in RESULT_FILES}


def paid_calls(folder: Path) -> int:
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    return int(manifest["accounting"]["total"]["calls"])


def manifest_paid(folder: Path) -> dict[str, int]:
    """The run's paid calls and tokens, as its manifest counts them (to hold against what the judge answered)."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    total = manifest["accounting"]["total"]
    return {name: int(total[name]) for name in ("calls", "prompt_tokens", "completion_tokens")}


def write_400(folder: Path, name: str, base_url: str, executor: dict[str, Any] | None = None, *,
              distinct: bool = False) -> Path:
    """``folder/name.yaml`` over 400 outputs (160 queries of 2 or 3 runs, ``folder/data.csv``, written once), with
    the demo's evaluators: every trec family (nugget lists carried to test-retest), consistency with ROUGE,
    BERTScore (the embedding metric), dispersion and judge test-retest; the judge at ``base_url``, its own cache.
    The queries repeat their questions and answers every 11 queries (identical no_answer requests), unless
    ``distinct``: each question and answer then names its query."""
    from tests.test_csv_windows import _csv, _rows

    if not (folder / "data.csv").exists():
        rows = _rows(160)
        for row in rows if distinct else ():
            row[1] += f" ({row[0]})"
            row[5] += f" ({row[0]})" if row[5] else ""
        (folder / "data.csv").write_text(_csv(rows), encoding="utf-8")
    config: dict[str, Any] = {
        "input": "data.csv", "output_dir": name,
        "judge": {"model": "simulated-judge", "base_url": base_url, "cache": f"{name}-cache.sqlite"},
        "evaluators": [{"type": "trec", "k_values": [1, 3], "metrics": ["umbrela", "nuggets", "citation", "no_answer"]},
                       {"type": "consistency", "metrics": ["rouge", "bertscore", "dispersion"], "judge_repeats": 2}]}
    if executor is not None:
        config["executor"] = executor
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def assert_400_local(folder: Path) -> None:
    """The local run of ``write_400`` evaluated 400 outputs and asked its judge-health controls."""
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["n_outputs"] == 400
    controls = manifest["health"]["controls"]
    assert controls["items"] and not str(controls["state"]).startswith("not run"), controls["state"]
    assert "consistency.judge.nugget_assignment.flip_rate" in (folder / "summary.csv").read_text(encoding="utf-8")
