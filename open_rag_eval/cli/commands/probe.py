"""``calibrate --injection``: run the injection probe with the config's judge and write injection.csv/json."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path
from typing import Any

from open_rag_eval.calibration.injection import PAYLOADS, ProbeResult, probe
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.store.csv_cells import csv_text
from open_rag_eval.store.fileio import atomic_write_json, atomic_write_text
from open_rag_eval.cli.terminal import echo

__all__ = ["run_probe", "table"]

log = logging.getLogger("open_rag_eval")

_COLUMNS = ("task", "payload", "items", "compared", "moved", "moved_rate", "ci_low", "ci_high", "off_target",
            "to_target", "to_target_rate", "to_target_ci_low", "to_target_ci_high", "no_verdict")


def run_probe(args: argparse.Namespace) -> int:
    from open_rag_eval.run import pipeline
    from open_rag_eval.config import load_config
    from open_rag_eval.evaluators.trec import TrecEvaluator

    if args.config is None:
        raise ConfigError("calibrate --injection needs --config FILE (its judge and input are probed)")
    loaded = load_config(args.config)
    outputs = pipeline.load_outputs(loaded)
    if not outputs:
        raise ConfigError("the config names no input to sample from", path="input", file=str(args.config))
    trec = next((spec.build() for spec in loaded.evaluators if isinstance(spec.build(), TrecEvaluator)),
                TrecEvaluator())

    async def main() -> tuple[ProbeResult, RunInfo]:
        async with pipeline.judge_session(loaded.judge, loaded.base_dir, str(loaded.path or "")) as judge:
            result = await probe(judge, outputs, sample=args.sample, seed=args.seed, grader=trec.umbrela,
                                 citation=trec.citation)
            return result, pipeline.run_info(loaded, judge)

    result, info = asyncio.run(main())
    out = args.output_dir or loaded.resolve_path(loaded.config.output_dir)
    rows = result.rows()
    write_probe(out, rows, {"sample": args.sample, "seed": args.seed, "simulated": info.simulated,
                            "payloads": {task: [vars(p) for p in payloads] for task, payloads in PAYLOADS.items()},
                            "examples": {f"{c.task}/{c.payload}": c.examples for c in result.cells},
                            "ci": "Wilson score 95%", "headline": result.headline(),
                            "baseline_one_label": result.one_label()})
    echo("\n".join([*result.headline(), *table(rows, info)]))
    if (out / "results.json").exists() and (out / "report.html").exists():
        from open_rag_eval.report import write_report  # noqa: PLC0415 (heavy at use)

        write_report(out)  # the report leads with the probe's result
    log.info("injection probe: %s", out / "injection.csv")
    return 0


def write_probe(out: Path, rows: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)

    cells = [{k: ("" if v is None else f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()}
             for row in rows]
    atomic_write_text(out / "injection.csv", csv_text(_COLUMNS, cells))
    atomic_write_json(out / "injection.json", {**meta, "rows": rows})


def table(rows: list[dict[str, Any]], info: RunInfo) -> list[str]:
    lines = [f"{'task':<9} {'payload':<20} {'moved':>11} {'rate':>6}  {'95% CI':<16} {'to target':>10} "
             f"{'no verdict':>10}"]
    for row in rows:
        rate = "—" if row["moved_rate"] is None else f"{row['moved_rate']:.2f}"
        ci = "" if row["ci_low"] is None else f"[{row['ci_low']:.2f}, {row['ci_high']:.2f}]"
        lines.append(f"{row['task']:<9} {row['payload']:<20} {row['moved']:>4}/{row['compared']:<6} {rate:>6}  "
                     f"{ci:<16} {row['to_target']:>4}/{row['off_target']:<5} {row['no_verdict']:>10}")
    if info.simulated:
        lines.append("SIMULATED JUDGE: these rates describe the loopback simulated judge, not a real model")
    return lines
