"""`open-rag-eval sweep --config FILE`: one scheduled consistency sweep, with an exit code a scheduler can alert on.

Exit codes: 0 stable (or the first sweep: nothing to compare with), 1 regression beyond a threshold or a
``fail_if_drop`` amount (named on stdout), 2 bad config or missing extra, 3 bad input, 4 judge unavailable, 5 any
other error (e.g. every call to the RAG system failed), 6 the sweep's run is incomplete (a judged metric failed for
every output: ``run.status``; recorded, with its verdict, unless that verdict is a regression, whose 1 wins),
7 inconclusive (a metric moved beyond its threshold but the paired test cannot confirm it: the code every gate gives
INCONCLUSIVE, ``scoring.verdict``). Errors never exit 1, so 1 always means "regression".
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from open_rag_eval.core.errors import EXIT_INCONCLUSIVE, OpenRagEvalError, exit_code
from open_rag_eval.cli.terminal import echo

if TYPE_CHECKING:
    from open_rag_eval.sweeps.run import Comparison, SweepOutcome

HELP = "query a live RAG system, evaluate consistency, record the sweep in the history and compare with a baseline"

EXIT_STABLE, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 5  # INCONCLUSIVE: the one code every gate uses
_VERDICT_CODES = {"regression": EXIT_REGRESSION, "inconclusive": EXIT_INCONCLUSIVE}

log = logging.getLogger("open_rag_eval")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="YAML config with connector: and sweep: sections")
    parser.add_argument("--track", choices=["mlflow", "opik"],
                        help="log the sweep's run to MLflow or Opik (run named <system>-<sweep id>, the verdict as a tag "
                        "and metrics); the config's tracking: section gives the details (docs/tracking.md)")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.cli import error_line

    try:
        from open_rag_eval.cli.commands.eval import tracking_options
        from open_rag_eval.config import load_config
        from open_rag_eval.sweeps.run import sweep

        loaded = load_config(args.config)
        tracking = tracking_options(loaded, args.track)  # a missing backend package: exit 2 before the sweep
        outcome = sweep(loaded)
    except OpenRagEvalError as error:
        log.error("%s", error_line(error))
        code = exit_code(error)
        return EXIT_ERROR if code == EXIT_REGRESSION else code
    except Exception as error:  # a scheduler must never read a crash as "regression"
        log.exception("sweep failed: %s", type(error).__name__)
        return EXIT_ERROR
    echo(format_outcome(outcome), end="")
    code = exit_code_of(outcome)
    if not outcome.status.complete:
        log.error("%s", outcome.status.line(outcome.output_dir))
    tracked = track_sweep(outcome, tracking, _VERDICT_CODES.get(outcome.verdict, EXIT_STABLE))
    return code if code != EXIT_STABLE else tracked  # a verdict outranks a tracking failure (its line is printed)


def exit_code_of(outcome: SweepOutcome) -> int:
    """A regression's 1, else 6 for an incomplete run (a re-run may settle the rest), else 7 or 0 by the verdict."""
    from open_rag_eval.run.status import EXIT_INCOMPLETE

    if outcome.verdict != "regression" and not outcome.status.complete:
        return EXIT_INCOMPLETE
    return _VERDICT_CODES.get(outcome.verdict, EXIT_STABLE)


def track_sweep(outcome: SweepOutcome, options: Any, code: int) -> int:
    """Log the sweep's results folder as one run: named ``<run_name or system>-<sweep id>`` (the id holds the UTC
    time), tagged with the sweep id, system, baseline and verdict; the verdict's exit code and the counts of
    regressed and inconclusive metrics as metrics. Exit 5 when tracking fails."""
    if options is None:
        return EXIT_STABLE
    from open_rag_eval.cli.commands.eval import track_run

    tags = {"open_rag_eval.sweep_id": outcome.sweep_id, "open_rag_eval.sweep_system": outcome.system,
            "open_rag_eval.sweep_baseline": outcome.baseline_id or "", "open_rag_eval.sweep_verdict": outcome.verdict}
    options = options.model_copy(update={"run_name": f"{options.run_name or outcome.system}-{outcome.sweep_id}",
                                         "tags": {**options.tags, **tags}})
    metrics: dict[str, float] = {"sweep.verdict_exit_code": code, "sweep.regressions": len(outcome.regressions),
               "sweep.inconclusive": len(outcome.inconclusive)}
    return track_run(outcome.output_dir, options, metrics=metrics)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _row(c: Comparison) -> str:
    delta = "-" if c.delta is None else f"{c.delta:+.3f}"
    p = "-" if c.p_value is None else f"{c.p_value:.4f}"
    state = c.state.upper() if c.state != "ok" else "ok"
    direction = "lower" if c.lower_is_better else "higher"
    limit = "-" if c.threshold is None else f"{c.threshold:.3f}"
    absolute = "-" if c.fail_if_drop is None else f"{c.fail_if_drop:.3f}"
    line = (f"  {c.metric:<34} {_number(c.baseline):>8} {_number(c.current):>8} {delta:>8} {p:>7} "
            f"{limit:>6} {absolute:>6} {direction:>6}  {state}")
    return line + (f"  ({c.note})" if c.note else "")


def _named(comparisons: list[Comparison]) -> str:
    def allowed(c: Comparison) -> str:
        limits = [f"{c.threshold:g}" if c.threshold is not None else "", f"fail_if_drop {c.fail_if_drop:g}"
                  if c.fail_if_drop is not None else ""]
        return " / ".join(part for part in limits if part)

    return ", ".join(f"{c.metric} ({'no value' if c.delta is None else f'{c.delta:+.3f}'}, allowed {allowed(c)})"
                     for c in comparisons)


def format_outcome(outcome: SweepOutcome) -> str:
    lines = [
        (f"sweep {outcome.sweep_id}  system={outcome.system}  {outcome.n_queries} queries x {outcome.repeats} runs, "
         f"{outcome.n_failed_outputs} of {outcome.n_outputs} system calls failed"),
        f"results: {outcome.output_dir}",
    ]
    if outcome.info.simulated:
        lines.append("SIMULATED JUDGE: judge-based scores come from the simulated judge and mean nothing")
    if not outcome.status.complete:
        lines.append(f"INCOMPLETE RUN: {outcome.status.summary()}")
    if outcome.baseline_id is None:
        lines.append("verdict: FIRST SWEEP (no baseline yet; recorded)")
        return "\n".join(lines) + "\n"
    lines.append(f"baseline: {outcome.baseline_id}")
    if outcome.comparisons:
        lines.append(f"  {'metric':<34} {'baseline':>8} {'current':>8} {'delta':>8} {'p':>7} {'limit':>6} "
                     f"{'fail':>6} {'better':>6}  state")
        lines.extend(_row(c) for c in outcome.comparisons)
    else:
        lines.append("  no thresholds configured (sweep.thresholds, sweep.fail_if_drop): nothing is checked")
    if outcome.regressions:
        lines.append(f"verdict: REGRESSION in {_named(outcome.regressions)}")
    elif outcome.inconclusive:
        lines.append(f"verdict: INCONCLUSIVE in {_named(outcome.inconclusive)}: too few queries for the paired test "
                     "to reach alpha (add queries, or sweep.fail_if_drop for an absolute rule)")
    else:
        lines.append("verdict: STABLE")
    return "\n".join(lines) + "\n"
