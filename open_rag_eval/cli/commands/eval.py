"""`open-rag-eval eval --config FILE`: evaluate RAG outputs and write the results directory."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

log = logging.getLogger("open_rag_eval")


HELP = "evaluate RAG outputs (CSV/JSONL or a connector) and write results, summary, manifest and report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="YAML config")
    parser.add_argument("-o", "--output", "--output-dir", dest="output_dir", type=Path, metavar="DIR",
                        help="results folder (overrides output_dir)")
    parser.add_argument("--limit", type=positive_int, metavar="N",
                        help="evaluate only the first N queries (all their runs); N >= 1")
    parser.add_argument("--labels", type=Path, action="append", default=[], metavar="FILE",
                        help="people's labels (qrels, TSV or JSONL, as for calibrate; repeatable; overrides the "
                        "config's labels): summary.csv and the report add the judged metrics' corrected means "
                        "(docs/calibration.md)")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate and estimate judge calls and cost; call nothing")
    parser.add_argument("--strict-judge", action="store_true",
                        help="exit 6 when the judge is unhealthy (judge.health thresholds; results are still written)")
    parser.add_argument("--executor", choices=["local", "ray"],
                        help="where to evaluate (overrides executor.type): this process, or Ray workers with one "
                        "shared judge budget and cache (extra [ray]; docs/scaling.md)")
    parser.add_argument("--ray-address", metavar="ADDRESS",
                        help="join this Ray cluster ('auto' or ray://host:10001; implies --executor ray)")
    parser.add_argument("--shard", metavar="I/N", type=_shard,
                        help="evaluate only shard I of N (whole queries) and write a shard folder for `merge` "
                        "(array jobs; --output-dir names the folder)")
    parser.add_argument("--track", choices=["mlflow", "opik"],
                        help="log the run to MLflow or Opik (params, metrics with CIs, per-query table, report) after "
                        "its files are written; the config's tracking: section gives the details (docs/tracking.md)")


def _shard(text: str) -> tuple[int, int]:
    from open_rag_eval.executors.array import parse_shard

    return parse_shard(text)


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (argparse prints the message and exits 2 otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.cli import head_start

    head_start.begin(args)  # the run's first judge requests, sent while the rest loads (docs/scaling.md)
    try:
        return _evaluate(args)
    finally:
        head_start.finish()


def _evaluate(args: argparse.Namespace) -> int:
    from open_rag_eval.cli import judge_kept, loading
    from open_rag_eval.cli.console import ProgressDisplay, print_plan, print_summary
    from open_rag_eval.core.progress import Progress

    if args.dry_run:
        from open_rag_eval.run import pipeline
        from open_rag_eval.config import load_config

        from open_rag_eval.run.corrected import run_labels

        loaded = load_config(args.config)
        outputs = pipeline.load_outputs(loaded, args.limit)
        run_labels(list(args.labels) or [loaded.resolve_path(p) for p in loaded.config.labels or ()])  # bad: exit 3
        print_plan(loaded, outputs, pipeline.plan(loaded, outputs), args.output_dir)
        return 0
    progress = Progress()
    progress.begin("read", "config")
    with ProgressDisplay(progress, stream=sys.stderr):  # on screen before the imports below take their time
        with loading(args.whole_process):
            from open_rag_eval.run import pipeline
            from open_rag_eval.config import load_config

            loaded = load_config(args.config)
        if args.labels:
            loaded.config.labels = [str(path.resolve()) for path in args.labels]
        args.judge_cached = judge_kept(loaded.judge)  # what a stopped run leaves to resume from
        if args.shard is not None:
            return _run_shard(loaded, args)
        tracking = tracking_options(loaded, args.track)
        executor = None
        if args.executor or args.ray_address or loaded.config.executor is not None:
            from open_rag_eval.executors import executor_for

            executor = executor_for(loaded, args.executor, args.ray_address)
        report = pipeline.run(loaded, output_dir=args.output_dir, limit=args.limit, progress=progress,
                              executor=executor, write_report=_write_report)
        if not report.status.complete:
            progress.outcome = "incomplete"  # never "done": the error line below says why
    print_summary(report, every_metric=getattr(args, "verbose", False))
    _say_corrected(report.output_dir)
    tracked = track_run(report.output_dir, tracking)
    if not report.status.complete:
        from open_rag_eval.run.status import EXIT_INCOMPLETE

        log.error("%s", report.status.line(report.output_dir))
        return EXIT_INCOMPLETE
    if args.strict_judge and report.health is not None and not report.health.healthy:
        log.error(
            "error: the judge is unhealthy and --strict-judge is set (exit 6); the results are written but rest on "
            "%d problem(s) listed above", len(report.health.problems))
        return 6  # the run finished, but its judge is not to be trusted
    return tracked


def _write_report(folder: Path) -> Path:
    """``report.write_report``, imported when the run's files are written: its modules (about 20 ms of CPU) are no
    part of the way to the run's first judge request."""
    from open_rag_eval.report import write_report

    return write_report(folder)


def _say_corrected(output_dir: Path) -> None:
    """A run with people's labels: one line saying where the corrected estimates are (the headline shows those of
    its metrics)."""
    from open_rag_eval.report.data import read_json
    from open_rag_eval.run.corrected import CORRECTED_FILE

    rows = read_json(output_dir / CORRECTED_FILE).get("metrics") or []
    if rows:
        log.info("corrected with people's labels: %d metric(s) in summary.csv and %s (the headline shows its own)",
                 len(rows), CORRECTED_FILE)


def _run_shard(loaded: Any, args: argparse.Namespace) -> int:
    import asyncio

    from open_rag_eval.executors.array import run_shard

    if args.limit is not None or args.track or args.executor == "ray" or args.ray_address:
        log.error("error: --shard runs one shard here: --limit, --track, --executor ray and --ray-address do not "
                  "apply (exit 2)")
        return 2
    index, count = args.shard
    folder = asyncio.run(run_shard(loaded, index, count, args.output_dir))
    log.info("wrote shard %d/%d to %s (join every shard with: open-rag-eval merge DIR...)", index, count, folder)
    return 0


def tracking_options(loaded: Any, backend: str | None) -> Any:
    """The run's tracking options (config section, ``--track`` sets the backend), checked before any work: a missing
    backend package is exit 2 before anything is judged."""
    from open_rag_eval.tracking.options import TrackingOptions

    options = loaded.section("tracking", TrackingOptions)
    if backend is None and options is None:
        return None
    from open_rag_eval.tracking import check_available

    options = (options or TrackingOptions()).model_copy(update={"backend": backend} if backend else {})
    check_available(options)
    return options


def track_run(output_dir: Path, options: Any, *, metrics: dict[str, float] | None = None) -> int:
    """Log the written run; a tracking failure is one line and exit 5 -- the results stay written."""
    if options is None:
        return 0
    from open_rag_eval.core.redaction import cut
    from open_rag_eval.tracking import TrackingError, location, track

    where = location(options)
    try:
        run_id = track(output_dir, options, metrics=metrics)
    except TrackingError as error:
        log.error("error: tracking the run to %s at %s failed (exit 5): %s; the results are written to %s",
                  options.backend, where, cut(str(error)), output_dir)
        return 5
    log.info("tracked: %s run %s in experiment %r at %s", options.backend, run_id, options.experiment, where)
    return 0
