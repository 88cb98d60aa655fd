"""Run an ablation: every variant through the normal pipeline into its own folder, then the comparison.

All variants are built and checked first (a bad grid value fails before anything runs). A variant whose folder
already holds a complete run of the same variant config (``manifest.json``: same config digest, ``complete``) is
reused, not run again; any other runs -- an interrupted one resumes like any run (saved outputs, the judge cache,
which every variant shares). The ablation's folder is locked while it runs.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from open_rag_eval.ablation.output import write_csv, write_json, write_markdown
from open_rag_eval.ablation.table import AblationTable, ablation_table
from open_rag_eval.ablation.variants import Variant, ablate_options, ablation_root, build_variants
from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.errors import InputError, MissingDependency, StorageError
from open_rag_eval.report.data import ResultSet
from open_rag_eval.scoring.verdict import Rule
from open_rag_eval.store.lock import FolderLock

__all__ = ["AblationOutcome", "aablate", "ablate", "finished"]

log = logging.getLogger(__name__)


@dataclass
class AblationOutcome:
    root: Path
    variants: list[Variant]
    table: AblationTable
    ran: list[str] = field(default_factory=list)
    reused: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)  # variants whose run finished incomplete
    files: list[Path] = field(default_factory=list)


def finished(variant: Variant) -> bool:
    """Does the variant's folder hold a complete run of this very variant config?"""
    try:
        manifest = json.loads((variant.folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(manifest, dict) and manifest.get("config_digest") == variant.loaded.digest and \
        manifest.get("complete") is True


def _results(variant: Variant) -> ResultSet:
    from open_rag_eval.report.loader import load_results

    result = load_results(variant.folder)
    result.label = variant.name
    return result


def ablate(loaded: LoadedConfig, rules: Mapping[str, Rule] | None = None) -> AblationOutcome:
    return asyncio.run(aablate(loaded, rules))


def _check_gates(rules: Mapping[str, Rule], sets: list[ResultSet]) -> None:
    """A gate on a metric no variant has could never trip: refused (exit 3), naming the close names."""
    known = {metric for result in sets for metric in result.metrics}
    for metric in rules:
        if metric not in known:
            close = difflib.get_close_matches(metric, sorted(known), n=3)
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            raise InputError(f"no variant has a metric '{metric}', so this gate could never trip{hint}",
                             field="--fail-if-worse")


async def aablate(loaded: LoadedConfig, rules: Mapping[str, Rule] | None = None) -> AblationOutcome:
    """Run every variant (or reuse it) and compare; ``rules``: the gated metrics' allowed drops (``gate``)."""
    from open_rag_eval.report import write_report
    from open_rag_eval.run.pipeline import arun

    options = ablate_options(loaded)
    variants = build_variants(loaded)
    root = ablation_root(loaded)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StorageError(f"cannot create the ablation folder: {error.strerror}", path=root) from None
    ran, reused, incomplete = [], [], []
    with FolderLock(root):
        for number, variant in enumerate(variants, start=1):
            if finished(variant):
                log.info("variant %d/%d %s: finished earlier, reused (%s)", number, len(variants), variant.name,
                         variant.folder.name)
                reused.append(variant.name)
                continue
            log.info("variant %d/%d %s: running into %s", number, len(variants), variant.name, variant.folder)
            report = await arun(variant.loaded, output_dir=variant.folder, write_report=write_report)
            ran.append(variant.name)
            if report.incomplete:
                incomplete.append(variant.name)
        sets = [_results(variant) for variant in variants]
        baseline = next(s for s, v in zip(sets, variants) if v.baseline)
        _check_gates(rules or {}, sets)
        table = ablation_table(baseline, sets, options.metrics, alpha=options.alpha, seed=options.seed,
                               resamples=options.resamples, rules=rules)
        outcome = AblationOutcome(root, variants, table, ran, reused, incomplete)
        outcome.files = [write_csv(table, root / "ablation.csv"),
                         write_markdown(table, root / "ablation.md", incomplete=incomplete),
                         write_json(table, variants, root / "ablation.json", incomplete=incomplete)]
        outcome.files += _plot(table, sets, root / "ablation.png")
    return outcome


def _plot(table: AblationTable, sets: list[ResultSet], path: Path) -> list[Path]:
    from open_rag_eval.report.plots import plot_metrics

    if not table.metrics:
        return []
    try:
        return [plot_metrics(sets, table.metrics, path, f"open-rag-eval ablation (baseline {table.baseline})")]
    except MissingDependency as error:
        log.warning("no ablation.png: %s", error)
        return []
