"""The metric catalogue: every metric family and the columns it writes, declared once.

A family declares its columns (patterns such as ``umbrela.p@k``), whether the judge produces them (a judged metric
that failed for every output makes a run incomplete), its title in the report and one line on what it measures; a
column declares its label, range, direction, kind (a score, a count, or a tally of what went wrong), whether it is a
headline number (and its target), whether ``plot`` draws it by default, and a one-line definition. The run status,
the report (groups, headline cards, axes, colours), ``compare`` and ``plot`` defaults, the diagnosis rules,
tracking, ``validate``'s threshold names and docs/RESULTS.md all read it; ``tests/test_catalogue.py`` fails when an
evaluator writes a column it does not declare, or when docs/RESULTS.md says otherwise.

Adding a family is one ``register(Family(...))`` call (the declarations are in ``open_rag_eval.core.families``).
Patterns: ``@k`` stands for any cutoff (``@10``), ``<metric>`` for any metric name, ``<a|b>`` for one of the
alternatives and any other ``<name>`` for one name part.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

__all__ = ["Column", "Family", "axis_range", "column", "declared", "display_name", "families", "family",
           "family_of", "family_title", "headline_columns", "is_count", "is_dispersion", "is_judged", "is_tally",
           "lower_is_better", "markdown_table", "metric_order", "plot_defaults", "possible_values", "register", "short_name",
           "value_bounds"]

Kind = Literal["score", "count", "tally"]  # a tally counts what went wrong: shown as a note, never a row of zeros
UNIT: tuple[float, float] = (0.0, 1.0)
SPREAD = "spread"  # the report's group of ``consistency.<metric>.<stat>``
SPREAD_TITLE = "Spread of each metric across runs"
UNBOUNDED_STATS = ("std", "cv", "iqr", "cai", "variance", "range")  # dispersion stats with no fixed range: lower better


@dataclass(frozen=True)
class Column:
    pattern: str
    definition: str
    label: str = ""  # the report's and plot's name (the pattern itself when empty)
    short: str = ""  # a table header (the pattern itself when empty)
    range: tuple[float, float] | None = UNIT  # the axis; None for counts and times (autoscaled)
    lower: bool = False  # lower is better
    kind: Kind = "score"
    headline: int = 0  # position among the headline cards (1 first); 0: not a headline number
    target: float | None = None  # the headline card's target (docs/report.md)
    plot: bool = False  # drawn by ``plot`` unless metrics are named
    bound: bool = True  # ``range`` is what the values can take (an interval is clipped to it), not only an axis
    possible: tuple[float, float] | None = None  # the values it can take when not ``range`` (``bound`` False)

    @property
    def regex(self) -> re.Pattern[str]:
        return _compile(self.pattern)


@dataclass(frozen=True)
class Family:
    name: str  # the prefix before the first dot (``consistency.judge``: the longer prefix wins)
    title: str
    definition: str
    columns: tuple[Column, ...]
    judged: bool = False  # values come from the judge: failed everywhere = an incomplete run
    evaluator: str = ""  # the evaluator that writes it (``plot --evaluator`` picks its defaults)


# <task>: a judge task, or a criterion's own task criteria.<name> (judge health counts each criterion apart)
_PLACEHOLDERS = {"k": "[0-9]+", "metric": ".+", "task": "(?:criteria\\.)?[A-Za-z0-9_]+"}


@lru_cache(maxsize=None)
def _compile(pattern: str) -> re.Pattern[str]:
    out = []
    for part in re.split(r"(<[^>]+>|@k\b)", pattern):
        if part == "@k":
            out.append("@" + _PLACEHOLDERS["k"])
        elif part.startswith("<") and part.endswith(">"):
            inner = part[1:-1]
            out.append(f"(?:{'|'.join(map(re.escape, inner.split('|')))})" if "|" in inner
                       else _PLACEHOLDERS.get(inner, "[A-Za-z0-9_]+"))
        else:
            out.append(re.escape(part))
    return re.compile("".join(out))


_REGISTRY: dict[str, Family] = {}


def register(new: Family) -> Family:
    """Add a family (its name must be new and every column must start with ``<name>.``)."""
    if new.name in _REGISTRY:
        raise ValueError(f"metric family {new.name!r} is registered already")
    wrong = [c.pattern for c in new.columns if not c.pattern.startswith(new.name + ".")]
    if wrong:
        raise ValueError(f"columns of family {new.name!r} must start with '{new.name}.': {wrong}")
    _REGISTRY[new.name] = new
    _lookup.cache_clear()
    return new


def families() -> list[Family]:
    _load()
    return list(_REGISTRY.values())


def _load() -> None:
    if not _REGISTRY:
        import open_rag_eval.core.families  # noqa: F401,PLC0415 (registers the project's families)


def family_of(metric: str) -> Family | None:
    """The family a metric belongs to: the longest registered prefix."""
    _load()
    parts = metric.split(".")
    for end in range(len(parts) - 1, 0, -1):
        found = _REGISTRY.get(".".join(parts[:end]))
        if found is not None:
            return found
    return None


@lru_cache(maxsize=4096)
def _lookup(metric: str) -> Column | None:
    owner = family_of(metric)
    if owner is None:
        return None
    return next((c for c in owner.columns if c.regex.fullmatch(metric)), None)


def column(metric: str) -> Column | None:
    """The declaration of a metric, None when no family declares it (a custom metric, a peer tool's column)."""
    _load()
    return _lookup(metric)


def declared(metric: str) -> bool:
    return column(metric) is not None


def is_judged(metric: str) -> bool:
    """Whether the judge produces this metric's values (``consistency.<metric>.<stat>`` spreads are not judged)."""
    owner = family_of(metric)
    return owner is not None and owner.judged and not is_dispersion(metric)


def is_dispersion(metric: str) -> bool:
    """``consistency.<metric>.<stat>``: the spread of another metric across the runs of a query."""
    return metric.startswith("consistency.") and metric.count(".") >= 2 and not metric.startswith("consistency.judge.")


def _base(metric: str) -> tuple[str, str]:
    """``consistency.umbrela.mean.std`` -> (``umbrela.mean``, ``std``)."""
    base, _, stat = metric[len("consistency."):].rpartition(".")
    return base, stat


def family(metric: str) -> str:
    """The group a metric is reported in: its family; spreads across runs apart."""
    if is_dispersion(metric):
        return SPREAD
    owner = family_of(metric)
    return owner.name if owner is not None else metric.split(".", 1)[0]


def family_title(name: str) -> str:
    if name == SPREAD:
        return SPREAD_TITLE
    _load()
    return _REGISTRY[name].title if name in _REGISTRY else name


def display_name(metric: str) -> str:
    found = column(metric)
    if found is None or not found.label:
        return metric
    cutoff = re.search(r"@[0-9]+$", metric)
    return found.label.replace("@k", cutoff.group(0)) if cutoff else found.label


def short_name(metric: str) -> str:
    """A column header: short for the common metrics, the metric name otherwise."""
    found = column(metric)
    return found.short if found is not None and found.short else metric


def is_tally(metric: str) -> bool:
    """Counts of what went wrong (invalid grades, failed or defaulted judgments, fabricated citations): the report
    shows them as a note on their family, not as rows of zeros."""
    found = column(metric)
    return found is not None and found.kind == "tally" and not is_dispersion(metric)


def is_count(metric: str) -> bool:
    """Counts and times have no fixed upper bound."""
    if is_dispersion(metric):
        return is_count(_base(metric)[0])
    found = column(metric)
    return found is not None and found.kind != "score"


def lower_is_better(metric: str) -> bool:
    if is_dispersion(metric):
        base, stat = _base(metric)
        return stat in UNBOUNDED_STATS or lower_is_better(base)
    found = column(metric)
    return found is not None and found.lower


_LOCATION_STATS = ("mean", "median", "min", "max")  # a spread statistic in the metric's own units
_NON_NEGATIVE_STATS = ("std", "variance", "iqr", "range", "cv")


def value_bounds(metric: str) -> tuple[float, float] | None:
    """The values a metric can take, so that an interval of its mean never claims values it cannot have; None
    where that is not certain (Krippendorff's alpha and rescaled BERTScore can go negative; counts and times are
    unbounded; a name the catalogue does not declare). A spread's location statistics take their metric's bounds,
    its std, variance, IQR, range and CV are never negative."""
    if is_dispersion(metric):
        base, stat = _base(metric)
        if stat in _LOCATION_STATS:
            return value_bounds(base)
        return (0.0, math.inf) if stat in _NON_NEGATIVE_STATS else None
    found = column(metric)
    return found.range if found is not None and found.bound else None


def possible_values(metric: str) -> tuple[float, float] | None:
    """The values a metric can take at all, for checking values read back (``merge`` refuses a shard's value
    outside them): ``value_bounds`` where it knows them, else the column's ``possible`` range, else ``[0, inf)`` for
    counts, tallies and times; None for a name the catalogue does not declare."""
    bounds = value_bounds(metric)
    if bounds is not None or is_dispersion(metric):
        return bounds
    found = column(metric)
    if found is None:
        return None
    if found.possible is not None:
        return found.possible
    return (0.0, math.inf) if found.kind != "score" else None


def axis_range(metric: str) -> tuple[float, float] | None:
    """The fixed y range of a metric (UMBRELA grades 0-3, scores 0-1); None for counts, times and spreads."""
    if is_dispersion(metric):
        base, stat = _base(metric)
        return None if stat in UNBOUNDED_STATS else axis_range(base)
    found = column(metric)
    return found.range if found is not None else UNIT


def metric_order(names: Iterable[str]) -> list[str]:
    """Stable order: by family (in the catalogue's order, unknown families after), then naturally (p@3 before
    p@10)."""
    ranks = {name: i for i, name in enumerate(f.name for f in families() if "." not in f.name)}

    def key(name: str) -> tuple[int, str, list[int | str]]:
        prefix = name.split(".", 1)[0]
        natural = [int(part) if part.isascii() and part.isdigit() else part for part in re.split(r"([0-9]+)", name)]
        return (ranks.get(prefix, len(ranks)), prefix, natural)

    return sorted(set(names), key=key)


def _columns() -> Iterator[Column]:
    for owner in families():
        yield from owner.columns


def headline_columns() -> list[Column]:
    """The headline cards' metrics in order (``@k`` patterns stand for the run's largest k up to 10)."""
    return sorted((c for c in _columns() if c.headline), key=lambda c: c.headline)


def plot_defaults(evaluator: str) -> list[str]:
    """What ``plot`` draws unless told: the plotted columns of the evaluator's families (``consistency``: the
    trec evaluator's and the consistency evaluator's)."""
    wanted = ("trec", "consistency") if evaluator == "consistency" else (evaluator,)
    return [c.pattern for owner in families() if owner.evaluator in wanted for c in owner.columns if c.plot]


def markdown_table() -> str:
    """docs/RESULTS.md's table of metric names (a test keeps the two equal)."""
    lines = ["| metric | range | better | definition |", "|---|---|---|---|"]
    for owner in families():
        judged = "judged; " if owner.judged else ""
        lines.append(f"| **`{owner.name}`** | | | **{owner.title}** ({judged}{owner.definition}) |")
        for c in owner.columns:
            span = "count" if c.range is None else f"{c.range[0]:g}-{c.range[1]:g}"
            lines.append(f"| `{c.pattern}` | {span} | {'lower' if c.lower else 'higher'} | "
                         f"{c.definition.replace('|', chr(92) + '|')} |")
    return "\n".join(lines)

