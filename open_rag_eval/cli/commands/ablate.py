"""`open-rag-eval ablate --config FILE`: run the variants of the config's ``ablate:`` grid on the same queries and
compare each with the baseline variant (docs/ablation.md).

An ablation explores: a variant worse than the baseline is its finding, not a failure, so without a gate it exits 0
whatever the verdicts. ``--fail-if-worse METRIC[:AMOUNT]`` (as in ``compare``) makes it a gate: every variant must
hold the metric against the baseline, judged by the one verdict module (``scoring.verdict``, Holm across the table).

Exit codes: 0 done (and every gate passed), 1 REGRESSION (a gated metric of a variant is worse than the baseline),
2 bad config (a grid value included: every variant is checked before anything runs) or missing extra, 3 bad input
(a gate on a metric no variant has, too), 4 judge unavailable (re-run to resume), 5 a file problem, 6 done but a
variant's run is incomplete (a judged metric failed for every output), 7 INCONCLUSIVE (a gated metric of a variant
dropped but the test cannot confirm it). A regression's 1 wins over 6, and 6 over 7: a confirmed regression stands
whatever else is missing, and an incomplete variant re-run may settle what was inconclusive.
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
    parser.add_argument("--fail-if-worse", action="append", default=[], metavar="METRIC[:THRESHOLD]",
                        help="gate on METRIC for every variant against the baseline, repeatable (as compare's): exit "
                        "1 (REGRESSION) when a variant is significantly worse (Holm across the table), 7 "
                        "(INCONCLUSIVE) when it is worse but the test cannot confirm it; with THRESHOLD, a drop "
                        "larger than it is a regression whatever the p-value and a smaller one passes")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.ablation.output import markdown
    from open_rag_eval.ablation.run import ablate, finished
    from open_rag_eval.ablation.table import gate
    from open_rag_eval.cli.commands.compare import parse_gates
    from open_rag_eval.core.errors import EXIT_INCONCLUSIVE
    from open_rag_eval.scoring.verdict import INCONCLUSIVE, PASS, REGRESSION, Rule, worst
    from open_rag_eval.ablation.variants import build_variants
    from open_rag_eval.config import load_config

    loaded = load_config(args.config)
    if args.list:
        for variant in build_variants(loaded):
            state = "finished" if finished(variant) else "to run"
            echo(f"{variant.name}{' (baseline)' if variant.baseline else ''}: {variant.folder} [{state}]")
        return 0
    gates = parse_gates(args.fail_if_worse)
    rules = {m: Rule() if amount is None else Rule(max_drop=amount, fail_if_drop=amount) for m, amount in gates}
    outcome = ablate(loaded, rules)
    echo(markdown(outcome.table, incomplete=outcome.incomplete), end="")
    if outcome.reused:
        log.info("reused %d finished variant(s): %s", len(outcome.reused), ", ".join(outcome.reused))
    log.info("wrote %s", ", ".join(str(path) for path in outcome.files))
    verdicts = gate(outcome.table, list(rules))
    verdict = worst(verdicts)
    if verdicts:
        named = ", ".join(f"{v.metric} {v.outcome}" for v in verdicts)
        log.log(logging.INFO if verdict == PASS else logging.ERROR, "gates: %s (%s)", verdict, named)
    if outcome.incomplete:
        log.error("error: incomplete variant run(s): %s (a judged metric failed for every output; see their "
                  "report.html; re-run to retry)", ", ".join(outcome.incomplete))
    if verdict == REGRESSION:
        return 1
    return 6 if outcome.incomplete else EXIT_INCONCLUSIVE if verdict == INCONCLUSIVE else 0
