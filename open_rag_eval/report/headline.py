"""The headline: the few numbers to look at first, with their direction and a target that colours them.

The set and the targets come from the config's ``report:`` section (kept in manifest.json), else the defaults
below (documented in docs/report.md). A target is the value a metric should reach (or stay under, when lower
is better); within a tenth of the metric's range short of it is "near", further is "below".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from open_rag_eval.core.catalogue import axis_range, headline_columns, lower_is_better

__all__ = ["DEFAULT_HEADLINE", "DEFAULT_TARGETS", "headline_metrics", "report_options", "status", "target_for"]

# In order (the catalogue's headline columns); golden.ndcg@k / golden.recall@k stand for the largest k (at most 10)
# the run has.
DEFAULT_HEADLINE = tuple(c.pattern for c in headline_columns())
DEFAULT_TARGETS: dict[str, float] = {c.pattern: c.target for c in headline_columns() if c.target is not None}


def _at_k(pattern: str, present: Sequence[str]) -> str | None:
    """``golden.ndcg@k`` -> the present ``golden.ndcg@K`` with the largest K <= 10 (else the smallest K)."""
    stem = pattern[:-1]
    tails = [m[len(stem):] for m in present if m.startswith(stem)]
    ks = sorted(int(tail) for tail in tails if tail.isascii() and tail.isdigit())
    if not ks:
        return None
    small = [k for k in ks if k <= 10]
    return f"{stem}{small[-1] if small else ks[0]}"


def headline_metrics(present: Iterable[str], chosen: Sequence[str] | None = None) -> list[str]:
    """The headline metrics this run has, in order (``chosen``: the config's list, else the defaults)."""
    names = list(dict.fromkeys(present))
    out = []
    for metric in chosen or DEFAULT_HEADLINE:
        concrete = _at_k(metric, names) if metric.endswith("@k") else metric if metric in names else None
        if concrete and concrete not in out:
            out.append(concrete)
    return out


def report_options(manifest: Mapping[str, Any]) -> tuple[list[str] | None, dict[str, float]]:
    """(headline list or None, targets) from the config kept in the manifest; defaults fill the targets."""
    section = ((manifest.get("config") or {}) if isinstance(manifest.get("config"), dict) else {}).get("report")
    section = section if isinstance(section, dict) else {}
    chosen = section.get("headline")
    targets = dict(DEFAULT_TARGETS)
    for name, value in (section.get("targets") or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            targets[str(name)] = float(value)
    return ([str(m) for m in chosen] if isinstance(chosen, list) else None), targets


def target_for(metric: str, targets: Mapping[str, float]) -> float | None:
    if metric in targets:
        return targets[metric]
    generic = re.sub(r"@[0-9]+$", "@k", metric)
    return targets.get(generic)


def status(metric: str, value: float | None, target: float | None) -> str:
    """good / near / below against the target; none without a value or a target."""
    if value is None or target is None:
        return "none"
    low, high = axis_range(metric) or (0.0, max(abs(target), 1.0))
    margin = 0.1 * (high - low)
    gap = (value - target) if not lower_is_better(metric) else (target - value)
    return "good" if gap >= 0 else "near" if gap >= -margin else "below"
