"""Short diagnosis hints where a pattern is clear: a symptom in the scores and the part of the system it points to.

Pure functions over metric means (of a whole evaluation, or of one query).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["diagnose"]

Means = Mapping[str, float | None]


def _get(means: Means, metric: str) -> float | None:
    value = means.get(metric)
    return None if value is None else float(value)


def diagnose(means: Means) -> list[tuple[str, str]]:
    """(area, hint) pairs, most upstream first: retrieval, then generation, citations, support, declines."""
    hints: list[tuple[str, str]] = []
    umbrela, vital = _get(means, "umbrela.mean"), _get(means, "nuggets.vital")
    precision, hhem = _get(means, "citation.precision"), _get(means, "hhem.score")
    answered, fabricated = _get(means, "no_answer.answered"), _get(means, "citation.fabricated")
    if umbrela is not None and umbrela < 1.0:
        hints.append(("retrieval", (f"passages are mostly judged not relevant (mean UMBRELA grade {umbrela:.2f} < 1): "
                      "look at retrieval (index, chunking, query rewriting, top-k) before the generator")))
    if umbrela is not None and umbrela >= 1.5 and vital is not None and vital < 0.5:
        hints.append(("generation", (f"relevant passages are retrieved (UMBRELA {umbrela:.2f}) but vital nugget "
                      f"recall is low ({vital:.2f}): the answer leaves out facts the passages hold (prompt, context "
                      "truncation, answer length)")))
    if precision is not None and precision < 0.5:
        hints.append(("citations", (f"citation support precision is low ({precision:.2f}): statements cite passages "
                      "that do not support them (citation placement or the citation instruction)")))
    if fabricated:
        hints.append(("citations", (f"citations to passages that were not retrieved ({fabricated:.2f} per answer): "
                      "the generator invents source ids")))
    if hhem is not None and hhem < 0.5:
        hints.append(("support", (f"low HHEM factual consistency ({hhem:.2f}): the answer says things the passages "
                      "do not support (hallucination or outside knowledge)")))
    if answered is not None and answered < 0.8:
        declined = 1.0 - answered
        where = ("and relevant passages were found, so the generator is too cautious"
                 if umbrela is not None and umbrela >= 1.5 else "check retrieval for these queries first")
        hints.append(("no answer", f"{declined:.0%} of answers decline to answer; {where}"))
    return hints
