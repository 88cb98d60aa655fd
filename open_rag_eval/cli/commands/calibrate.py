"""`open-rag-eval calibrate`: how well the judge agrees with people, and how easily its verdicts are moved."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from open_rag_eval.cli.terminal import echo

HELP = ("compare the judge's labels with human labels (Cohen's kappa, Kendall's tau, confusion, bootstrap CIs) and "
        "correct the judged metrics' means with them (PPI++), "
        "or probe it with prompt injections (--injection)")

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--labels", type=Path, action="append", default=[], metavar="FILE",
                        help="human labels: TREC qrels (UMBRELA grades) or TSV/JSONL (nugget importance, nugget "
                        "support, citation support); repeatable")
    parser.add_argument("--config", type=Path, help="YAML config: its output_dir holds the results to compare "
                        "(and its judge is probed with --injection)")
    parser.add_argument("--results", type=Path, action="append", default=[], metavar="DIR",
                        help="results folder(s) of `eval` (default: the config's output_dir); several folders "
                        "are several systems")
    parser.add_argument("-o", "--output", "--output-dir", dest="output_dir", type=Path, metavar="DIR", help="where calibrate.csv/json go (default: the first results "
                        "folder)")
    parser.add_argument("--injection", action="store_true", help="re-judge a sample with prompt-injection "
                        "payloads and report how often each task's verdict moved")
    parser.add_argument("--sample", type=int, default=20, metavar="N", help="items per task for --injection "
                        "(default 20)")
    parser.add_argument("--resamples", type=int, default=2000, metavar="N", help="bootstrap resamples (default 2000)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap and sampling seed (default 0)")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.core.errors import ConfigError

    if args.resamples < 1 or args.sample < 1:
        raise ConfigError("--resamples and --sample must be at least 1")
    if args.injection:
        from open_rag_eval.cli.commands.probe import run_probe

        return run_probe(args)
    if not args.labels:
        raise ConfigError("calibrate needs --labels FILE (or --injection)")
    from open_rag_eval.calibration.compare import compare
    from open_rag_eval.calibration.run import (corrected_of, corrected_table, judged_of, load_results, table,
                                               write_calibration)
    from open_rag_eval.inputs.human_labels import read_label_files
    from open_rag_eval.run.corrected import METHOD

    folders = list(args.results) or [_default_results(args.config)]
    human = read_label_files(args.labels)
    loaded = load_results(folders)
    agreements = compare(human, judged_of(loaded, folders), resamples=args.resamples, seed=args.seed)
    corrected = corrected_of(human, loaded, folders)
    out = args.output_dir or (folders[0] if folders[0].is_dir() else folders[0].parent)
    meta = {"labels": [p.name for p in args.labels], "results": [f.name for f in folders],
            "resamples": args.resamples, "seed": args.seed,
            "ci": "percentile bootstrap 95%, resampling queries",
            "corrected": METHOD}
    write_calibration(out, agreements, meta, corrected)
    echo("\n".join(table(agreements) + corrected_table(corrected)))
    log.info("calibration: %s", out / "calibrate.csv")
    return 0


def _default_results(config: Path | None) -> Path:
    from open_rag_eval.config import load_config
    from open_rag_eval.core.errors import ConfigError

    if config is None:
        raise ConfigError("name the results with --results DIR or a config with --config FILE")
    loaded = load_config(config)
    return loaded.resolve_path(loaded.config.output_dir)
