"""The judge-health report of a run: per task the share of judgments in each parse class, checked against thresholds.

Rates are over judgments (one judgment = one ``ask``: a reply, plus its re-asks). Each task's label distribution
(the commonest label's share, the entropy) flags a degenerate judge: one label for (almost) everything.
``clean + fallback + echo + invalid + failed = 1`` per task; ``reasked`` is the share of judgments that needed more
than one reply. Citation rows add a check per output: precision and recall that rest on less than
``min_labelled_share`` of the cited statements (the rest had no parsed label) are flagged. Names are stable
(docs/RESULTS.md, docs/judge-health.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import CLASSES, ECHO, FAILED, FALLBACK, INVALID
from open_rag_eval.core.recording import HealthRecorder
from open_rag_eval.judge.thresholds import HealthThresholds
from open_rag_eval.scoring.stats import Aggregate
from open_rag_eval.core.types import Score

__all__ = ["FAIL", "HEALTH_PREFIX", "INCONCLUSIVE", "PASS", "WEAK", "HealthReport", "HealthThresholds", "assess",
           "controls_line", "is_health", "told_apart_text", "verdict_line"]

HEALTH_PREFIX = "health."
MIN_PAIRS = 4  # controls: with fewer judged pairs even a judge that tells none apart cannot be shown to fail
PASS, WEAK, FAIL, INCONCLUSIVE = "pass", "weak", "fail", "inconclusive"  # the verdicts of a task's controls
RATES = (*CLASSES, "reasked")  # clean, fallback, echo, invalid, failed, reasked
TASK_ORDER = (Tasks.UMBRELA, Tasks.NUGGET_CREATE, Tasks.NUGGET_IMPORTANCE, Tasks.NUGGET_ASSIGN, Tasks.SUPPORT,
              Tasks.NO_ANSWER)


_LIMITS = {FALLBACK: "max_fallback_rate", INVALID: "max_invalid_rate", ECHO: "max_echo_rate",
           FAILED: "max_failed_rate"}


def is_health(metric: str) -> bool:
    return metric.startswith(HEALTH_PREFIX)


@dataclass
class HealthReport:
    tasks: dict[str, dict[str, Any]]  # task -> judgments, replies, counts per class, rates, label distribution
    thresholds: HealthThresholds
    low_labelled: list[dict[str, Any]] = field(default_factory=list)  # outputs whose citation scores rest on few
    n_cited_outputs: int = 0
    controls: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> control summary (health.controls)
    control_items: list[dict[str, Any]] = field(default_factory=list)  # every control with its verdict
    controls_state: str = "off"  # run | off (judge.health.controls: false) | not run: <why>
    reply_format: str = "text"  # how replies were asked for: text, or json_schema (judge.structured)

    @property
    def problems(self) -> list[str]:
        """One line per problem, naming its cause: parse failure, no reply (timeout, overflow ...), degenerate,
        controls failed."""
        lines = []
        for task, row in self.tasks.items():
            for klass, limit_name in _LIMITS.items():
                limit = getattr(self.thresholds, limit_name)
                if row["rates"][klass] > limit:
                    lines.append(f"{task}: {row['counts'][klass]} of {row['judgments']} judgments {_WHAT[klass]} "
                                 f"({_cause(klass, row)}; {row['rates'][klass]:.0%} > {limit_name} {limit:.0%})")
        for task, summary in self.controls.items():
            if self.controls_failed(task):
                lines.append(f"{task}: controls failed: {controls_line(summary)}")
            elif _unasked(summary):
                lines.append(f"{task}: controls inconclusive: {_unasked_line(summary)}")
        for task, row in self.tasks.items():
            if self._degenerate(row) and self._controls_verdict(task) != PASS:
                lines.append(f"{task}: degenerate: {_degenerate_line(row, self.thresholds)}")
        if self.low_labelled:
            shown = ", ".join(f"{o['query_id']}/{o['run']} ({o['n_labelled']} of {o['n_cited']})"
                              for o in self.low_labelled[:5])
            more = f" and {len(self.low_labelled) - 5} more" if len(self.low_labelled) > 5 else ""
            lines.append(f"support: {len(self.low_labelled)} output(s) have citation precision/recall resting on "
                         f"less than {self.thresholds.min_labelled_share:.0%} of their cited statements "
                         f"(labelled of cited): {shown}{more}")
        return lines

    @property
    def notes(self) -> list[str]:
        """What is worth knowing but does not make the judge unhealthy: a degenerate task whose controls passed
        (the data may be that uniform), controls that could not decide."""
        lines = []
        for task, row in self.tasks.items():
            if self._degenerate(row) and self._controls_verdict(task) == PASS:
                lines.append(f"{task}: {_degenerate_line(row, self.thresholds)}; its controls were told apart, so "
                             "the data may be that uniform")
            elif not self._degenerate(row) and row.get("n_labels", 0) >= 2 and row["top_label_share"] == 1.0:
                lines.append(f"{task}: every judgment got the same label ({row['top_label']!r}, {row['n_labels']} "
                             f"of {row['n_labels']}); too few to call it degenerate (min_labels "
                             f"{self.thresholds.min_labels}), but a judge that gives one answer to everything looks "
                             "like this")
        for task, summary in self.controls.items():
            if summary["verdict"] == FAIL and not self.controls_failed(task):
                lines.append(f"{task}: controls failed ({controls_line(summary)}), but the run's grades of this "
                             "criterion vary: it may not be about how an answer fits its question (then set "
                             "controls: false on it), or the judge grades something else")
            if summary["verdict"] == WEAK:
                lines.append(f"{task}: controls weak: {controls_line(summary)}; not shown able to tell its controls "
                             "apart (more pairs, judge.health.control_pairs, say more)")
            if summary["verdict"] == INCONCLUSIVE and not _unasked(summary):
                why = f" ({'; '.join(summary['no_verdict_reasons'])})" if summary["no_verdict_reasons"] else ""
                lines.append(f"{task}: controls inconclusive: {summary['pairs_judged']} of {summary['pairs']} pairs "
                             f"got both verdicts, fewer than {MIN_PAIRS}{why}")
        if self.controls_state not in ("run", "off"):
            lines.append(f"controls {self.controls_state}")
        return lines

    @property
    def healthy(self) -> bool:
        return not self.problems

    def _controls_verdict(self, task: str) -> str | None:
        return self.controls.get(task, {}).get("verdict")

    def controls_failed(self, task: str) -> bool:
        """The task's controls failed and that makes it unhealthy. A criterion's controls assume the criterion is
        about how an answer fits its question (an answer to another question should not meet it as well); their
        failure makes it unhealthy only when the run's grades of the criterion are one label too (a judge that
        gives one grade to everything), else it is a note (as it is before the criterion has any grade)."""
        if self._controls_verdict(task) != FAIL:
            return False
        row = self.tasks.get(task) or {}  # no labels yet (a live line, or every judgment failed): nothing shown
        return not task.startswith("criteria.") or row.get("top_label_share") == 1.0

    def _degenerate(self, row: Mapping[str, Any]) -> bool:
        return bool(row.get("n_labels", 0) >= self.thresholds.min_labels
                    and row["top_label_share"] >= self.thresholds.max_label_share)

    def degenerate(self) -> dict[str, str]:
        """task -> the label it gave (almost) every time, for the degenerate tasks (controls passed or not)."""
        return {task: row["top_label"] for task, row in self.tasks.items() if self._degenerate(row)}

    def unhealthy_tasks(self) -> list[str]:
        flagged = [task for task, row in self.tasks.items()
                   if any(row["rates"][k] > getattr(self.thresholds, n) for k, n in _LIMITS.items())
                   or (self._degenerate(row) and self._controls_verdict(task) != PASS)]
        flagged += [task for task, summary in self.controls.items()
                    if (self.controls_failed(task) or _unasked(summary)) and task not in flagged]
        if self.low_labelled and Tasks.SUPPORT not in flagged:
            flagged.append(Tasks.SUPPORT)
        return flagged

    def snapshot(self) -> dict[str, Any]:
        """manifest.json's ``health`` section."""
        return {"healthy": self.healthy, "problems": self.problems, "notes": self.notes,
                "unhealthy_tasks": self.unhealthy_tasks(),
                "thresholds": self.thresholds.model_dump(), "reply_format": self.reply_format, "tasks": self.tasks,
                "controls": {"state": self.controls_state, "tasks": self.controls, "items": self.control_items},
                "citation_low_labelled": self.low_labelled, "n_cited_outputs": self.n_cited_outputs}

    def summary_rows(self) -> list[Aggregate]:
        """summary.csv rows ``health.<task>.<class>_rate`` (mean = the rate, n = judgments), the label distribution
        ``health.<task>.top_label_share`` / ``label_entropy`` (n = labels) and the controls
        ``health.<task>.control_accuracy`` / ``controls_told_apart`` (with their Wilson intervals; n = judged
        items or pairs, n_failed = those without a verdict)."""
        rows = []
        for task, row in self.tasks.items():
            for name in RATES:
                rows.append(Aggregate(f"{HEALTH_PREFIX}{task}.{name}_rate", row["rates"][name], None, None, None,
                                      row["judgments"], 0))
            if row.get("n_labels"):
                for name in ("top_label_share", "label_entropy"):
                    rows.append(Aggregate(f"{HEALTH_PREFIX}{task}.{name}", row[name], None, None, None,
                                          row["n_labels"], 0))
        for task, c in self.controls.items():
            (low, high), (apart_low, apart_high) = c["accuracy_ci"], c["told_apart_ci"]
            rows.append(Aggregate(f"{HEALTH_PREFIX}{task}.control_accuracy", c["accuracy"], None, low, high,
                                  c["judged"], c["items"] - c["judged"]))
            rows.append(Aggregate(f"{HEALTH_PREFIX}{task}.controls_told_apart", c["told_apart_share"], None,
                                  apart_low, apart_high, c["pairs_judged"], c["pairs"] - c["pairs_judged"]))
        if self.n_cited_outputs:
            share = len(self.low_labelled) / self.n_cited_outputs
            rows.append(Aggregate(f"{HEALTH_PREFIX}support.low_labelled_output_rate", share, None, None, None,
                                  self.n_cited_outputs, 0))
        return rows


def _cause(klass: str, row: Mapping[str, Any]) -> str:
    if klass == INVALID and row.get("unparsed"):
        shown = "; ".join(f"{problem!r} x{n}" for problem, n in list(row["unparsed"].items())[:3])
        return f"{_CAUSE[klass]}: {shown}"
    if klass != FAILED:
        return _CAUSE[klass]
    causes = row.get("causes") or {}
    listed = ", ".join(f"{cause} {n}" for cause, n in sorted(causes.items(), key=lambda item: (-item[1], item[0])))
    return f"no reply: {listed}" if listed else "no reply"


def _degenerate_line(row: Mapping[str, Any], thresholds: HealthThresholds) -> str:
    return (f"{row['top_label_share']:.0%} of {row['n_labels']} labels are {row['top_label']!r} (one label for "
            f"everything; max_label_share {thresholds.max_label_share:.0%} of at least {thresholds.min_labels})")


def told_apart_text(c: Mapping[str, Any]) -> str:
    """"4 of 5 pairs told apart (80%, 95% CI 38%-96%)": what a control verdict rests on, said beside it."""
    low, high = c["told_apart_ci"]
    if c["told_apart_share"] is None:
        return f"0 of {c['pairs']} pairs got both verdicts"
    return (f"{c['told_apart']} of {c['pairs_judged']} pairs told apart ({c['told_apart_share']:.0%}, 95% CI "
            f"{low:.0%}-{high:.0%})")


def verdict_line(task: str, c: Mapping[str, Any]) -> str:
    """A task's control verdict with what it rests on, for the health tables: "umbrela: pass -- 5 of 5 pairs told
    apart (100%, 95% CI 57%-100%; pass from 50%), accuracy 100% [72%-100%] of 10"."""
    if c.get("accuracy") is None:
        return f"{task}: {c['verdict']} -- no verdict on any of {c['items']} controls"
    levels = c.get("levels") or {}
    level = f"; pass from {levels['pass_from']:.0%}" if "pass_from" in levels else ""
    apart = told_apart_text(c)
    apart = apart[:-1] + f"{level})" if apart.endswith(")") else apart
    low, high = c["accuracy_ci"]
    return f"{task}: {c['verdict']} -- {apart}, accuracy {c['accuracy']:.0%} [{low:.0%}-{high:.0%}] of {c['judged']}"


def controls_line(c: Mapping[str, Any]) -> str:
    given = "; ".join(f"{side} items got " + ", ".join(f"{label!r} x{n}" for label, n in labels.items())
                      for side, labels in c["labels"].items() if labels)
    return f"{told_apart_text(c)}, accuracy {c['correct']} of {c['judged']}; {given}"


_CAUSE = {FALLBACK: "fallback parse", INVALID: "parse failure", ECHO: "echo"}
_WHAT = {FALLBACK: "were read only through a parser fallback", INVALID: "never parsed",
         ECHO: "echoed the prompt's labels or rubric", FAILED: "got no reply"}


def assess(recorder: HealthRecorder, scores: Sequence[Score], thresholds: HealthThresholds,
           controls: Mapping[str, Any] | None = None, reply_format: str = "text") -> HealthReport:
    """The health report from the run's recorded judgments, its citation counts and its controls (``{"state",
    "tasks", "items"}`` as ``health.controls`` gives them; None: no controls). ``reply_format``: ``json_schema`` when
    the judge was asked for structured replies (``judge.structured``): the parse rates are then those of structured
    replies."""
    tasks = {task: _task_row(recorder.tasks[task]) for task in _ordered(recorder.tasks)}
    cited, unlabelled = _per_output(scores, "citation.n_cited"), _per_output(scores, "citation.n_unlabelled")
    low = []
    for key, n_cited in cited.items():
        if n_cited <= 0:
            continue
        n_labelled = int(n_cited - unlabelled.get(key, 0))
        if n_labelled / n_cited < thresholds.min_labelled_share:
            low.append({"query_id": key[0], "run": key[1], "n_cited": int(n_cited), "n_labelled": n_labelled})
    n_cited_outputs = sum(1 for value in cited.values() if value > 0)
    controls = controls or {}
    return HealthReport(tasks, thresholds, low, n_cited_outputs, dict(controls.get("tasks") or {}),
                        list(controls.get("items") or []), str(controls.get("state", "off")), reply_format)


def _ordered(tasks: Iterable[str]) -> list[str]:
    known = [t for t in TASK_ORDER if t in tasks]
    return known + sorted(t for t in tasks if t not in TASK_ORDER)


def _task_row(counts: Any) -> dict[str, Any]:
    n = counts.judgments
    classes = {klass: counts.classes.get(klass, 0) for klass in CLASSES}
    rates = {klass: (value / n if n else 0.0) for klass, value in classes.items()}
    rates["reasked"] = counts.reasked / n if n else 0.0
    causes = {"causes": dict(counts.causes)} if counts.causes else {}
    unparsed = getattr(counts, "unparsed", None) or {}
    if unparsed:  # what was wrong with the judgments that never parsed, commonest first
        causes["unparsed"] = dict(sorted(unparsed.items(), key=lambda item: (-item[1], item[0])))
    return {"judgments": n, "replies": counts.replies, "counts": {**classes, "reasked": counts.reasked},
            "rates": rates, **causes, **label_shares(counts.labels)}


def label_shares(labels: Mapping[str, int]) -> dict[str, Any]:
    """The label distribution of a task: counts (commonest first), the commonest label and its share, the entropy
    in bits (0: one label for everything; log2(k): k labels equally often). Empty when the task gave no labels."""
    total = sum(labels.values())
    if not total:
        return {}
    ordered = dict(sorted(labels.items(), key=lambda item: (-item[1], item[0])))
    top = next(iter(ordered))
    entropy = -sum(n / total * math.log2(n / total) for n in ordered.values() if n)
    return {"labels": ordered, "n_labels": total, "top_label": top, "top_label_share": ordered[top] / total,
            "label_entropy": abs(round(entropy, 6))}


def _per_output(scores: Sequence[Score], metric: str) -> Mapping[tuple[str, int | None], float]:
    return {(s.query_id, s.run): s.value for s in scores if s.metric == metric and s.value is not None}


def _unasked(summary: Mapping[str, Any]) -> bool:
    """Controls that could not decide because their judge calls failed: the judge could not be checked, which a
    run does not pass over in silence (a problem: ``--strict-judge`` exits 6); too little data stays a note."""
    return summary["verdict"] == INCONCLUSIVE and summary.get("calls_failed", 0) > 0


def _unasked_line(summary: Mapping[str, Any]) -> str:
    reasons = [r.removeprefix("judge call failed: ") for r in summary.get("no_verdict_reasons") or []]
    reasons = reasons[:1]  # the first cause says it; the manifest keeps up to three
    return (f"{summary['calls_failed']} of {summary['items']} control calls failed, {summary['pairs_judged']} of "
            f"{summary['pairs']} pairs got both verdicts, so the judge could not be checked"
            + (f" ({reasons[0]})" if reasons else ""))
