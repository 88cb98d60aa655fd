"""Pure scores of the rubric judges (docs/generation.md): a 0-10 judge score in, a 0-1 value out."""

from __future__ import annotations

__all__ = ["RUBRIC_MAX", "normalise_rubric"]

RUBRIC_MAX = 10


def normalise_rubric(score: int) -> float:
    """A rubric score on 0..10 as a value on 0..1; a score outside the scale is a ``ValueError`` (never clipped)."""
    if isinstance(score, bool) or not isinstance(score, int) or not 0 <= score <= RUBRIC_MAX:
        raise ValueError(f"a rubric score is a whole number from 0 to {RUBRIC_MAX}, not {score!r}")
    return score / RUBRIC_MAX
