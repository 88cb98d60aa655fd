"""`open-rag-eval ablate --config FILE`: run the variants of the config's ``ablate:`` grid on the same queries and
compare each with the baseline variant (docs/ablation.md).

Exit codes: 0 done, 2 bad config (a grid value included: every variant is checked before anything runs) or missing
extra, 3 bad input, 4 judge unavailable (re-run to resume), 5 a file problem, 6 done but a variant's run is
incomplete (a judged metric failed for every output).
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from open_rag_eval.cli.terminal import echo

HELP = ("run a grid of variants of a config (connector or evaluator options, the config's ablate: section) on the "
        "same queries; compare each with the baseline variant (paired tests, Holm), the best variant per metric; "
        "writes ablation.csv, ablation.md, ablation.json, ablation.png; re-running reuses finished variants")

log = logging.getLogger("open_rag_eval")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="YAML config with an ablate: section")
    parser.add_argument("--list", action="store_true", help="list the variants and their folders; run nothing")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.ablation.output import markdown
    from open_rag_eval.ablation.run import ablate, finished
    from open_rag_eval.ablation.variants import build_variants
    from open_rag_eval.config import load_config

    loaded = load_config(args.config)
    if args.list:
        for variant in build_variants(loaded):
            state = "finished" if finished(variant) else "to run"
            echo(f"{variant.name}{' (baseline)' if variant.baseline else ''}: {variant.folder} [{state}]")
        return 0
    outcome = ablate(loaded)
    echo(markdown(outcome.table, simulated=outcome.simulated, incomplete=outcome.incomplete), end="")
    if outcome.reused:
        log.info("reused %d finished variant(s): %s", len(outcome.reused), ", ".join(outcome.reused))
    log.info("wrote %s", ", ".join(str(path) for path in outcome.files))
    if outcome.incomplete:
        log.error("error: incomplete variant run(s): %s (a judged metric failed for every output; see their "
                  "report.html; re-run to retry)", ", ".join(outcome.incomplete))
        return 6
    return 0
