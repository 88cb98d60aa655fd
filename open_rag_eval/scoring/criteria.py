"""Pure scoring of user-written criteria (``type: criteria``, docs/criteria.md).

A criterion is judged on one of three scales: ``yes_no`` (no = 0, yes = 1), ``1-5`` or ``0-10``. Its value is the
grade mapped linearly onto 0..1 -- (grade - low) / (high - low) -- so every criterion reads the same way in the
report, in ``compare`` and in the confidence intervals, and the raw grade stays in the detail.

``weighted_grade``: G-Eval's form-filling score. Where the judge returns the log-probabilities of the tokens it could
have written for the grade, the grade is their probability-weighted mean over the scale's values, renormalised over
the values the judge gave any probability to (tokens outside the scale are ignored). Nothing is invented: with no
probability on any value of the scale, there is no weighted grade (None); log-probabilities that are not finite or
are above 0 weigh nothing (``ValueError`` saying which).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["LOGPROB_SLACK", "SCALES", "Scale", "logprob_problem", "normalise", "weighted_grade"]


@dataclass(frozen=True)
class Scale:
    name: str
    labels: tuple[str, ...]  # the words the judge may answer, lowest grade first

    @property
    def low(self) -> int:
        return 0 if self.name == "yes_no" else int(self.labels[0])

    @property
    def high(self) -> int:
        return 1 if self.name == "yes_no" else int(self.labels[-1])

    def grade(self, label: str) -> int:
        """The grade of an answered label (``ValueError`` when it is not on the scale)."""
        word = label.strip().lower()
        if word not in self.labels:
            raise ValueError(f"{label!r} is not on the {self.name} scale ({', '.join(self.labels)})")
        return self.labels.index(word) + self.low


SCALES: dict[str, Scale] = {
    "yes_no": Scale("yes_no", ("no", "yes")),
    "1-5": Scale("1-5", tuple(str(n) for n in range(1, 6))),
    "0-10": Scale("0-10", tuple(str(n) for n in range(0, 11))),
}


def normalise(scale: Scale, grade: float) -> float:
    """``grade`` on 0..1: (grade - low) / (high - low); ``ValueError`` outside the scale."""
    if not scale.low <= grade <= scale.high:
        raise ValueError(f"grade {grade} is outside {scale.low}..{scale.high}")
    return (grade - scale.low) / (scale.high - scale.low)


def logprob_problem(alternatives: Iterable[tuple[str, float]]) -> str | None:
    """Why ``alternatives`` cannot weigh a grade: a log-probability that is not a finite number, or one above 0 (a
    probability above 1; rounding up to ``LOGPROB_SLACK`` is allowed). None when they can."""
    for token, logprob in alternatives:
        if not math.isfinite(logprob):
            return f"a log-probability that is not a finite number ({logprob!r} for {token!r})"
        if logprob > LOGPROB_SLACK:
            return f"a log-probability above 0 ({logprob:g} for {token!r}: a probability above 1)"
    return None


LOGPROB_SLACK = 1e-4  # a log-probability this far above 0 is a rounding of 0, not a probability above 1


def weighted_grade(scale: Scale, alternatives: Iterable[tuple[str, float]]) -> float | None:
    """The probability-weighted mean grade over the scale's values among ``alternatives`` ((token, log-probability)
    pairs for the one position where the grade is written); None when no alternative is a value of the scale.
    ``ValueError`` (``logprob_problem``) when a log-probability is not finite or above 0: nothing is weighted with
    it."""
    alternatives = list(alternatives)
    problem = logprob_problem(alternatives)
    if problem is not None:
        raise ValueError(problem)
    weights: dict[int, float] = {}
    for token, logprob in alternatives:
        word = token.strip().strip('"').lower()
        if word in scale.labels and math.isfinite(logprob):
            grade = scale.grade(word)
            weights[grade] = weights.get(grade, 0.0) + math.exp(min(logprob, 0.0))
    total = sum(weights.values())
    if total <= 0.0:
        return None
    return sum(grade * weight for grade, weight in weights.items()) / total
