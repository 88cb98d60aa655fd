"""Short diagnosis hints where a pattern is clear: a symptom in the scores and the part of the system it points to.

Pure functions over metric means (of a whole evaluation, or of one query), and the run's judge-health section
(manifest.json ``health``). Judge health comes first: when the judge's replies for a task are unhealthy, the judge is
named as the likely cause, and the hints built on that task say so instead of blaming retrieval or the generator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["answer_evidence", "diagnose", "run_means"]

Means = Mapping[str, float | None]
# the judge tasks each hint area rests on
_TASKS = {"retrieval": ("umbrela",), "generation": ("umbrela", "nugget_create", "nugget_importance", "nugget_assign"),
          "citations": ("support",), "no answer": ("no_answer", "umbrela")}


def _get(means: Means, metric: str) -> float | None:
    value = means.get(metric)
    return None if value is None else float(value)


def answer_evidence(outputs: Iterable[Mapping[str, Any]]) -> bool | None:
    """Did any retrieved passage hold an answer (an UMBRELA grade of 2 or 3)? None when nothing was graded."""
    grades = [g.get("grade") for o in outputs
              for g in ((o.get("details") or {}).get("umbrela") or {}).get("grades") or []]
    graded = [g for g in grades if isinstance(g, (int, float))]
    return None if not graded else any(g >= 2 for g in graded)


def run_means(outputs: Iterable[Mapping[str, Any]], means: Mapping[str, float | None]) -> tuple[dict[str, Any], int]:
    """The run's means for the diagnosis with correct refusals set apart: (means where ``no_answer.answered`` is the
    share answered among outputs that had an answer to give, number of correct refusals)."""
    answered, refusals = [], 0
    for output in outputs:
        value = (output.get("scores") or {}).get("no_answer.answered")
        if value is None:
            continue
        if value < 0.5 and answer_evidence([output]) is False:
            refusals += 1
        else:
            answered.append(float(value))
    adjusted = dict(means)
    if refusals:
        adjusted["no_answer.answered"] = sum(answered) / len(answered) if answered else None
    return adjusted, refusals


def diagnose(means: Means, *, evidence: bool | None = None,
             health: Mapping[str, Any] | None = None) -> list[tuple[str, str]]:
    """(area, hint) pairs: the judge first when ``health`` (manifest.json's section) says it is unhealthy, then the
    most upstream: retrieval, generation, citations, support, declines. A hint resting on an unhealthy judge task
    says so instead of blaming the system.

    Declining when nothing retrieved holds an answer (``evidence`` False: no passage graded 2 or more; unknown:
    a mean grade under 1) is a correct refusal: it is said as such, never as a retrieval problem.
    """
    hints = _system_hints(means, evidence)
    unhealthy = _unhealthy_tasks(health)
    if not unhealthy:
        return hints
    judge = ("judge", (f"the judge's replies are unhealthy for {', '.join(unhealthy)} (see Judge health): scores "
             "built on them may show the judge's noise, not the system's; fix the judge (model, prompt, parse "
             "profile) before acting on the hints below"))
    return [judge] + [(area, _doubt(text, area, unhealthy)) for area, text in hints]


def _unhealthy_tasks(health: Mapping[str, Any] | None) -> list[str]:
    if not health or health.get("healthy", True):
        return []
    problems = [str(p) for p in health.get("problems") or []]
    return [task for task in (health.get("tasks") or {}) if any(p.startswith(f"{task}:") for p in problems)]


def _doubt(text: str, area: str, unhealthy: list[str]) -> str:
    shaky = [task for task in _TASKS.get(area, ()) if task in unhealthy]
    if not shaky:
        return text
    if area == "no answer":
        text = text.replace("so the generator is too cautious", "but check the judge before the generator")
    return f"{text} (uncertain: the judge's {', '.join(shaky)} replies are unhealthy)"


def _system_hints(means: Means, evidence: bool | None) -> list[tuple[str, str]]:
    hints: list[tuple[str, str]] = []
    umbrela, vital = _get(means, "umbrela.mean"), _get(means, "nuggets.vital")
    precision, hhem = _get(means, "citation.precision"), _get(means, "hhem.score")
    answered, fabricated = _get(means, "no_answer.answered"), _get(means, "citation.fabricated")
    no_evidence = evidence is False or (evidence is None and umbrela is not None and umbrela < 1.0)
    declined_on_no_evidence = answered is not None and answered < 0.5 and no_evidence
    if declined_on_no_evidence:
        hints.append(("no answer", "declined to answer, and no retrieved passage holds an answer (no UMBRELA grade "
                      "of 2 or more): a correct refusal given this evidence"))
    elif umbrela is not None and umbrela < 1.0:
        hints.append(("retrieval", (f"passages are mostly judged not relevant (mean UMBRELA grade {umbrela:.2f} < 1): "
                      "look at retrieval (index, chunking, query rewriting, top-k) before the generator")))
    declined = answered is not None and answered < 0.5  # a refusal has no facts or citations to judge
    if umbrela is not None and umbrela >= 1.5 and vital is not None and vital < 0.5 and not declined:
        hints.append(("generation", (f"relevant passages are retrieved (UMBRELA {umbrela:.2f}) but vital nugget "
                      f"recall is low ({vital:.2f}): the answer leaves out facts the passages hold (prompt, context "
                      "truncation, answer length)")))
    if precision is not None and precision < 0.5 and not declined:
        hints.append(("citations", (f"citation support precision is low ({precision:.2f}): statements cite passages "
                      "that do not support them (citation placement or the citation instruction)")))
    if fabricated:
        hints.append(("citations", (f"citations to passages that were not retrieved ({fabricated:.2f} per answer): "
                      "the generator invents source ids")))
    if hhem is not None and hhem < 0.5 and not declined:
        hints.append(("support", (f"low HHEM factual consistency ({hhem:.2f}): the answer says things the passages "
                      "do not support (hallucination or outside knowledge)")))
    if answered is not None and answered < 0.8 and not declined_on_no_evidence:
        where = ("and relevant passages were found, so the generator is too cautious"
                 if evidence is True or (umbrela is not None and umbrela >= 1.5)
                 else "open these queries to see whether their passages hold an answer")
        hints.append(("no answer", f"{1.0 - answered:.0%} of answers decline to answer; {where}"))
    return hints
