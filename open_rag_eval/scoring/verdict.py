"""One verdict for every gate: PASS, REGRESSION or INCONCLUSIVE, from a paired comparison of a candidate with its
baseline over the queries they share (``scoring.paired``). ``compare``, the pytest gate ``assert_metrics``,
``sweep`` and ``ablate`` all decide here, with the same words and reasons.

"Drop" is the change in the bad direction (down for most metrics, up for lower-is-better ones), and a ``Rule`` says
how much of it is allowed:

1. the candidate has no value at all (every output failed for the metric): REGRESSION -- failures must not look
   like stability;
2. no query has a value on both sides: INCONCLUSIVE (nothing to compare);
3. ``fail_if_drop``: an observed drop larger than this amount is a REGRESSION whatever the p-value;
4. a drop larger than ``max_drop`` that is significant (after the caller's correction, e.g. Holm): REGRESSION (a
   bootstrap interval alone is no proof: with a handful of queries it is far too narrow);
5. any other drop larger than ``max_drop``: INCONCLUSIVE, naming n and the smallest difference this n can tell from
   noise -- none when the sign-flip test cannot reach alpha with this many changed queries (its smallest p-value
   is 2 / 2^n, so 5 or fewer can never be significant at 0.05);
6. otherwise (no drop beyond ``max_drop``): PASS.

A gate never says pass when the test cannot tell: a drop it cannot confirm is INCONCLUSIVE, which has its own exit
code (7) in every command and its own exception in the API (``core.errors.Inconclusive``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from open_rag_eval.scoring.paired import PairedResult

__all__ = ["INCONCLUSIVE", "PASS", "REGRESSION", "Rule", "Verdict", "decide", "min_p_value", "queries_needed",
           "worst"]

Outcome = Literal["PASS", "REGRESSION", "INCONCLUSIVE"]
PASS: Outcome = "PASS"
REGRESSION: Outcome = "REGRESSION"
INCONCLUSIVE: Outcome = "INCONCLUSIVE"
EPS = 1e-12


@dataclass(frozen=True)
class Rule:
    max_drop: float = 0.0  # a larger drop is a regression when the test confirms it
    fail_if_drop: float | None = None  # a larger observed drop is a regression whatever the test says


@dataclass(frozen=True)
class Verdict:
    metric: str
    outcome: Outcome
    reason: str
    n: int = 0  # paired queries
    drop: float | None = None  # observed change in the bad direction
    detectable: float | None = None  # the smallest difference this n tells from noise (None: none can)

    def __str__(self) -> str:
        return f"{self.outcome} {self.metric}: {self.reason}"


def min_p_value(n_changed: int) -> float:
    """The smallest two-sided p-value of the sign-flip test over ``n_changed`` non-zero paired differences: only
    the observed signs and their mirror image are as extreme, 2 of 2^n assignments."""
    return 1.0 if n_changed < 1 else min(1.0, 2.0 ** (1 - n_changed))


def queries_needed(alpha: float) -> int:
    """The fewest changed queries with which the sign-flip test can reach ``alpha``."""
    return math.floor(1 - math.log2(alpha)) + 1


def decide(metric: str, test: PairedResult | None, *, lower: bool, rule: Rule = Rule(), significant: bool = False,
           alpha: float = 0.05, n_changed: int | None = None, no_value: str = "", tests: int = 1) -> Verdict:
    """The verdict on ``metric`` (see the module docstring). ``test``: the paired comparison (None when no query
    pairs); ``significant``: its p-value passed the caller's (corrected) bar; ``n_changed``: paired queries whose
    values differ (default ``test.n``); ``no_value``: why the candidate has no value at all, when it has none;
    ``tests``: how many tests the caller's correction spreads alpha over (Holm: the bar is alpha / tests at worst)."""
    if no_value:
        return Verdict(metric, REGRESSION, f"no value in the candidate ({no_value})")
    if test is None:
        return Verdict(metric, INCONCLUSIVE, "no query has a value on both sides: nothing to compare")
    sign = 1.0 if lower else -1.0
    drop = sign * test.diff
    ci = f"95% CI of the change {test.ci95_low:+.3f} .. {test.ci95_high:+.3f}, p {test.p_value:.3g}, n {test.n}"
    changed = test.n if n_changed is None else n_changed
    reachable = min_p_value(changed) <= alpha / max(tests, 1) + EPS
    detectable = (test.ci95_high - test.ci95_low) / 2 if reachable else None

    def made(outcome: Outcome, reason: str) -> Verdict:
        return Verdict(metric, outcome, reason, test.n, drop, detectable)

    if rule.fail_if_drop is not None and drop > rule.fail_if_drop + EPS:
        return made(REGRESSION, f"dropped {drop:.3f}, more than fail_if_drop {rule.fail_if_drop:g}: a regression "
                    f"whatever the p-value ({ci})")
    if drop > rule.max_drop + EPS and significant:
        return made(REGRESSION, f"dropped {drop:.3f}, more than the {rule.max_drop:g} allowed, significantly ({ci})")
    if drop > rule.max_drop + EPS:
        return made(INCONCLUSIVE, f"dropped {drop:.3f}, more than the {rule.max_drop:g} allowed, but the test "
                    f"cannot confirm it ({ci}): {_power(changed, alpha, tests, detectable)}")
    moved = f"changed {test.diff:+.3f}" if abs(test.diff) > EPS else "unchanged"
    return made(PASS, f"{moved}, no drop beyond the {rule.max_drop:g} allowed ({ci})")


def _power(changed: int, alpha: float, tests: int, detectable: float | None) -> str:
    bar = f"alpha {alpha:g}" + (f" / {tests} tests" if tests > 1 else "")
    if detectable is None:
        return (f"{changed} paired queries cannot reach {bar} (smallest possible p {min_p_value(changed):.3g}), "
                f"so no difference is detectable (unchanged queries do not count): use at least "
                f"{queries_needed(alpha / max(tests, 1))} queries, or an absolute drop rule (fail_if_drop, compare "
                "--fail-if-worse METRIC:AMOUNT)")
    return (f"with {changed} changed paired queries a difference under about {detectable:.3f} (half the CI's width) "
            f"cannot be told from noise at {bar}: add queries, or an absolute drop rule")


def worst(verdicts: Sequence[Verdict]) -> Outcome:
    """REGRESSION if any, else INCONCLUSIVE if any, else PASS (an empty list passes: nothing was gated)."""
    outcomes = {v.outcome for v in verdicts}
    return REGRESSION if REGRESSION in outcomes else INCONCLUSIVE if INCONCLUSIVE in outcomes else PASS
