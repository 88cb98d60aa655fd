"""Parse rates and label quality of recorded real judge replies, with and without structured replies.

Reads a JSONL file of recorded request/reply exchanges (one object a line: ``run``, ``status``, ``request`` -- the
JSON body sent -- and ``response`` -- the reply body), the data the run judged (a CSV in vectara's layout:
``query_id, query, passage_id, passage``) and each passage's group (a JSON object ``"QUERY_ID/PASSAGE_ID": "on" |
"off" | "near"``: answers the query, is about something else, is on the subject but does not answer it). Every
exchange is read as the run reads it: a reply asked by a schema (``response_format``, either form) must meet it
(``metrics.structured.schema_problem``), then the method's own parser (strict profile: a reply the method's format
does not hold counts as unparsed). Prints per run and task the replies, the share that parsed, and for UMBRELA the
mean grade of the run's own passages per group (controls left out: their passages are not in the data).

    python bench/judge_replies.py EXCHANGES.jsonl DATA.csv GROUPS.json [--runs trec15 trec15-jsx]
"""

from __future__ import annotations

import argparse
import csv
import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.core.judge_tasks import TABLE, Tasks
from open_rag_eval.core.parsing import (Parsed, classify_labels, classify_no_answer, classify_nugget_list,
                                        classify_support, classify_umbrela, strip_reasoning)
from open_rag_eval.health.controls import REFUSAL
from open_rag_eval.metrics.lexical import is_refusal
from open_rag_eval.metrics.structured import as_text, schema_problem

@dataclass
class Tally:
    replies: int = 0
    parsed: int = 0
    errors: int = 0  # HTTP errors: no reply to read
    grades: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))  # group -> UMBRELA grades
    problems: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # why replies did not parse
    labels: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # "what was judged:label" -> count


def task_of(user: str) -> str | None:
    if "score on an integer scale of 0 to 3" in user:
        return Tasks.UMBRELA
    if "Statement:" in user or "evaluate whether each statement" in user:
        return Tasks.SUPPORT
    if "attempt to answer the query" in user or "evaluate the answer generate" in user:
        return Tasks.NO_ANSWER
    if "atomic nuggets" in user:
        return Tasks.NUGGET_CREATE
    if "vital or okay" in user or ("vital" in user and "okay" in user):
        return Tasks.NUGGET_IMPORTANCE
    if "label each of the" in user:
        return Tasks.NUGGET_ASSIGN
    return None


def _count(user: str) -> int:
    words = user.split("label each of the ", 1)[1].split()
    return int(words[0]) if words and words[0].isdigit() else 0


def parser_of(task: str, user: str) -> Callable[[str], Parsed[Any]]:
    if task == Tasks.UMBRELA:
        return lambda text: classify_umbrela(text, "strict")
    if task == Tasks.SUPPORT:
        return lambda text: classify_support(text, "strict")
    if task == Tasks.NO_ANSWER:
        return classify_no_answer
    if task == Tasks.NUGGET_CREATE:
        return classify_nugget_list
    allowed = TABLE[Tasks.NUGGET_IMPORTANCE if task == Tasks.NUGGET_IMPORTANCE else Tasks.NUGGET_ASSIGN].labels
    return lambda text: classify_labels(text, _count(user), allowed, "strict")


def group_of(user: str, rows: Sequence[Mapping[str, str]], groups: Mapping[str, str]) -> str | None:
    """The group of the run's own (query, passage) pair an UMBRELA prompt holds; None for any other (a control)."""
    for row in rows:
        if row["passage"] in user and f"Query: {row['query']}" in user:
            return groups.get(f"{row['query_id']}/{row['passage_id']}")
    return None


def _label(tally: Tally, task: str, value: Any, user: str, rows: Sequence[Mapping[str, str]],
           groups: Mapping[str, str]) -> None:
    """Keep a first ask's label by what it judged: an UMBRELA grade by its passage's group, a support label by the
    cited passage's group, a no-answer verdict by whether the answer is a refusal."""
    if task == Tasks.UMBRELA:
        group = group_of(user, rows, groups)
        if group is not None:
            tally.grades[group].append(value[0])
    elif task == Tasks.SUPPORT:
        row = next((r for r in rows if r["passage"] in user), None)
        if row is not None:
            tally.labels[f"{groups.get(row['query_id'] + '/' + row['passage_id'])}:{value}"] += 1
    elif task == Tasks.NO_ANSWER and REFUSAL not in user:  # a control's canonical refusal is not the run's
        row = next((r for r in rows if r.get("generated_answer") and r["query"] in user), None)
        if row is not None:
            tally.labels[f"{'refusal' if is_refusal(row['generated_answer']) else 'answer'}:{value}"] += 1


def read_criteria(exchanges: Iterable[Mapping[str, Any]], rows: Sequence[Mapping[str, str]]) -> list[str]:
    """``type: criteria`` replies (yes/no ``correct``, 1-5 ``quality``; run 1 a good answer, run 2 a bad one): per
    run and criterion the share parsed, the written grades of good and of bad answers, and what the
    log-probabilities gave (the weighted grade, or why the written grade stands)."""
    from open_rag_eval.judge.base import Completion  # noqa: PLC0415
    from open_rag_eval.judge.replies import read_logprobs  # noqa: PLC0415
    from open_rag_eval.metrics._judging import Asked  # noqa: PLC0415
    from open_rag_eval.metrics.criteria import _weighted, parse_criterion  # noqa: PLC0415
    from open_rag_eval.scoring.criteria import SCALES  # noqa: PLC0415

    found: dict[tuple[str, str], dict[str, Any]] = {}
    for exchange in exchanges:
        user = exchange["request"]["messages"][-1]["content"]
        if "on this criterion only" not in user and "Judge this criterion only" not in user:
            continue
        if exchange["status"] != 200:
            continue
        scale = SCALES["yes_no"] if 'or "no"' in user else SCALES["1-5"]
        choice = exchange["response"]["choices"][0]
        text = choice["message"]["content"] or ""
        row = next((r for r in rows if r.get("generated_answer") and f"Answer: {r['generated_answer']}" in user), None)
        side = {"1": "good", "2": "bad"}.get(row["query_run"], "?") if row else "?"
        tally = found.setdefault((exchange["run"], scale.name), {"replies": 0, "parsed": 0, "good": [], "bad": [],
                                                                  "scoring": defaultdict(int)})
        tally["replies"] += 1
        parsed = parse_criterion(scale)(strip_reasoning(text))
        if parsed.value is None:
            continue
        tally["parsed"] += 1
        tally.setdefault(side, []).append(parsed.value[0])
        asked = Asked(parsed.value, "ok", text=text, completion=Completion(text, logprobs=read_logprobs(choice)))
        weighted, scoring = _weighted(scale, asked)
        tally["scoring"]["logprobs" if weighted is not None else scoring] += 1
    lines = []
    for (run, scale_name), t in sorted(found.items()):
        means = ", ".join(f"{side} {sum(t[side]) / len(t[side]):.2f} (n={len(t[side])})" for side in ("good", "bad")
                          if t[side])
        lines.append(f"{run:12} criteria {scale_name:6}  replies {t['replies']:3}  parsed {t['parsed']:3}  written "
                     f"grade {means}  scoring: " + ", ".join(f"{k} x{n}" for k, n in sorted(t["scoring"].items())))
    return lines


def read(exchanges: Iterable[Mapping[str, Any]], rows: Sequence[Mapping[str, str]], groups: Mapping[str, str]
         ) -> dict[str, dict[str, Tally]]:
    """run -> task -> what its replies were."""
    found: dict[str, dict[str, Tally]] = defaultdict(dict)
    for exchange in exchanges:
        request = exchange["request"]
        user = request["messages"][-1]["content"] if request["messages"][-1]["role"] == "user" else ""
        first = request["messages"][-1]["role"] == "user" and all(
            m["role"] != "assistant" for m in request["messages"])
        task = task_of(user)
        if task is None:
            continue
        tally = found[exchange["run"]].setdefault(task, Tally())
        if exchange["status"] != 200:
            tally.errors += 1
            continue
        tally.replies += 1
        text = strip_reasoning(exchange["response"]["choices"][0]["message"]["content"] or "")
        problem = schema_problem(text, request.get("response_format"))
        parsed = parser_of(task, user)(strip_reasoning(as_text(text, request))) if problem is None else None
        if parsed is None or parsed.value is None:
            tally.problems[problem or (parsed.problem if parsed else None) or "not in the method's format"] += 1
            continue
        tally.parsed += 1
        if first:
            _label(tally, task, parsed.value, user, rows, groups)
    return found


def report(found: Mapping[str, Mapping[str, Tally]], runs: Sequence[str] | None = None) -> list[str]:
    lines = []
    for run in runs or sorted(found):
        for task, tally in found.get(run, {}).items():
            share = f"{tally.parsed / tally.replies:.0%}" if tally.replies else "-"
            line = f"{run:12} {task:18} replies {tally.replies:3}  parsed {tally.parsed:3} ({share})"
            if tally.errors:
                line += f"  HTTP errors {tally.errors}"
            if tally.grades:
                line += "  mean grade " + ", ".join(
                    f"{group} {sum(g) / len(g):.2f} (n={len(g)})" for group, g in sorted(tally.grades.items()))
            if tally.labels:
                line += "  labels " + ", ".join(f"{key} x{n}" for key, n in sorted(tally.labels.items()))
            if tally.problems:
                top = max(tally.problems.items(), key=lambda item: item[1])
                line += f"  commonest problem: {top[0]!r} x{top[1]}"
            lines.append(line)
    return lines


def load(exchanges: Path, data: Path, groups: Path) -> tuple[list[dict[str, Any]], list[dict[str, str]],
                                                              dict[str, str]]:
    records = [json.loads(line) for line in exchanges.read_text(encoding="utf-8").splitlines() if line.strip()]
    with data.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    return records, rows, json.loads(groups.read_text(encoding="utf-8"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("exchanges", type=Path)
    parser.add_argument("data", type=Path)
    parser.add_argument("groups", type=Path)
    parser.add_argument("--runs", nargs="*")
    parser.add_argument("--criteria-data", type=Path, help="the CSV the criteria runs judged")
    args = parser.parse_args()
    records, rows, groups = load(args.exchanges, args.data, args.groups)
    for line in report(read(records, rows, groups), args.runs):
        print(line)
    if args.criteria_data is not None:
        with args.criteria_data.open(encoding="utf-8") as handle:
            for line in read_criteria(records, list(csv.DictReader(handle))):
                print(line)


if __name__ == "__main__":
    main()
