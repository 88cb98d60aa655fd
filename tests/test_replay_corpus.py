"""The TREC evaluation of the demo data, replayed offline from replies a real small model gave.

The corpus (tests/data/replay/, its README says how it was recorded) holds every HTTP exchange of one run against
llama.cpp's server with SmolLM2-135M-Instruct. Replaying it must give the same results every time, and what the
results say about parsing must equal what the raw replies imply -- counted here directly from the recorded
bodies, not through the project's parsers.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.judge.replay import replay_key
from open_rag_eval.metrics.umbrela import UmbrelaGrader
from open_rag_eval.core.parsing import UMBRELA_PATTERNS
from open_rag_eval.core.types import Passage

CORPUS_DIR = Path(__file__).resolve().parent / "data" / "replay"
CORPUS = CORPUS_DIR / "smollm2-demo.jsonl"
LIMIT = "4"  # the corpus was recorded with --limit 4
MODEL = "smollm2-135m-instruct"


def _lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


def _replies() -> dict[str, tuple[str, str]]:
    """key -> (task, reply text) of the last recorded attempt of every request; the text is None when there was
    no usable reply (an error status, an empty reply, or one cut off by the token limit)."""
    replies = {}
    for line in _lines():
        text = None
        if line["status"] == 200:
            choice = json.loads(line["body"])["choices"][0]
            if choice.get("finish_reason") != "length" and (choice["message"].get("content") or "").strip():
                text = choice["message"]["content"]
        replies[line["key"]] = (line["task"], text)
    return replies


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Two replays of the corpus: their results.json (and the CLI's output)."""
    config = (CORPUS_DIR / "smollm2-demo.yaml").read_text().replace("record:", "replay:")
    runs = []
    for name in ("first", "second"):
        folder = tmp_path_factory.mktemp(name)
        path = CORPUS_DIR / f".replay-{name}.yaml"  # beside the corpus: its relative paths resolve as recorded
        path.write_text(config)
        try:
            done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(path), "--limit",
                                   LIMIT, "--output-dir", str(folder)], capture_output=True, text=True, timeout=600)
        finally:
            path.unlink()
        runs.append({"done": done, "folder": folder,
                     "results": json.loads((folder / "results.json").read_text()) if done.returncode in (0, 6)
                     else None})
    return runs


def test_the_corpus_is_real_small_and_holds_no_secret() -> None:
    lines = _lines()
    assert CORPUS.stat().st_size < 2_000_000
    assert {line["model"] for line in lines} == {MODEL}
    assert {line["task"] for line in lines} >= {"umbrela", "nugget_create", "support", "no_answer"}
    text = CORPUS.read_text()
    assert "authorization" not in text.lower() and "bearer" not in text.lower()
    assert not any(json.loads(line["body"]).get("system_fingerprint", "") .startswith("fp_sim") for line in lines)


def test_the_whole_trec_evaluation_replays_offline_and_deterministically(replayed: list[dict[str, Any]]) -> None:
    first, second = replayed
    for run in replayed:
        assert run["results"] is not None, run["done"].stderr
        # the tape was recorded before the judge-health controls existed: only they miss (a failed control, said
        # with its cause), never a judgment of the run
        missed = [line for line in run["done"].stderr.splitlines() if "no recorded reply" in line]
        assert all("controls inconclusive" in line for line in missed), missed[:3]
        errors = [e for o in run["results"]["outputs"] for e in o["errors"].values()]
        assert not any("replay:" in e for e in errors), errors[:3]
    assert (first["folder"] / "results.csv").read_text() == (second["folder"] / "results.csv").read_text()
    assert (first["folder"] / "summary.csv").read_text() == (second["folder"] / "summary.csv").read_text()
    # nugget creation never parsed: the run is complete for nothing nugget-based, and says so with exit 6
    assert first["done"].returncode == 6 and "incomplete run" in first["done"].stderr
    assert first["results"]["simulated"] is False
    manifest = json.loads((first["folder"] / "manifest.json").read_text())
    assert MODEL in json.dumps(manifest)


def _umbrela_class(reply: str) -> str:
    """explicit: a pattern before the last matches; fallback: only "a digit 0-3 anywhere" does; none: no digit."""
    text = reply.strip().lower()
    flags = re.IGNORECASE | re.MULTILINE | re.DOTALL
    patterns = UMBRELA_PATTERNS["trec2024"]
    if any(re.search(p, text, flags) for p in patterns[:-1]):
        return "explicit"
    return "fallback" if re.search(r"[0-3]", text) else "none"


def test_umbrela_grades_are_what_the_raw_replies_imply(replayed: list[dict[str, Any]]) -> None:
    replies = _replies()
    grader = UmbrelaGrader()
    classes: Counter[str] = Counter()
    seen = set()
    for output in replayed[0]["results"]["outputs"]:
        passages = {p["id"]: p["text"] for p in output["passages"]}
        for grade in output["details"]["umbrela"]["grades"]:
            request = grader.request(output["query"], Passage(id=grade["passage_id"], text=passages[grade["passage_id"]]),
                                     0.0, 0)
            key = replay_key(model=MODEL, messages=request.messages, params=request.params,
                             prompt_version=request.prompt_version, sample=0)
            task, reply = replies[key]
            if reply is None:  # cut off by max_tokens: a failed judgment, never a grade
                assert (grade["grade"], grade["status"]) == (None, "failed"), grade
                continue
            kind = _umbrela_class(reply)
            if key not in seen:
                seen.add(key)
                classes[kind] += 1
            if kind == "none":
                assert (grade["grade"], grade["status"]) == (0, "defaulted"), (reply, grade)
            elif kind == "fallback":  # the last digit 0-3 anywhere in the reply, marked valid by the reference parser
                assert grade["grade"] == int(re.findall(r"[0-3]", reply.lower())[-1]), (reply, grade)
                assert grade["status"] == "ok"
    n_invalid = sum(o["scores"].get("umbrela.n_invalid", 0) for o in replayed[0]["results"]["outputs"])
    expected_invalid = sum(1 for o in replayed[0]["results"]["outputs"] for g in o["details"]["umbrela"]["grades"]
                           if g["status"] == "defaulted")
    assert n_invalid == expected_invalid
    assert sum(classes.values()) == len([k for k, (t, r) in replies.items() if t == "umbrela" and r is not None])
    assert classes["fallback"] > 0  # the corpus exists to show this: a real small model needs the fallback


def _support_label(reply: str) -> str | None:
    lower = reply.lower()
    found = [label for phrase, label in (("full support", "FS"), ("partial support", "PS"), ("no support", "NS"))
             if phrase in lower]
    return found[0] if found else None


def test_citation_unparsed_counts_equal_the_unparseable_raw_replies(replayed: list[dict[str, Any]]) -> None:
    support = [reply for task, reply in _replies().values() if task == "support"]
    assert None not in support
    unparseable = sum(1 for reply in support if _support_label(reply) is None)
    outputs = replayed[0]["results"]["outputs"]
    judged = [j for o in outputs for s in o["details"]["citation"]["statements"] for j in s["judgments"]
              if not j["fabricated"]]
    assert len(judged) == len(support)  # one request per judged citation in this corpus
    assert sum(o["scores"].get("citation.n_unparsed", 0) for o in outputs) == unparseable
    assert sum(1 for j in judged if j["label"] is None) == unparseable
    labels = Counter(_support_label(reply) for reply in support)
    assert Counter(j["label"] for j in judged) == labels


def _parses_as_list(reply: str) -> bool:
    cleaned = reply.replace("```python", "").replace("```", "").strip()
    try:
        value = ast.literal_eval(cleaned)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return False
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def test_nugget_creation_failures_equal_the_unparseable_raw_replies(replayed: list[dict[str, Any]]) -> None:
    created = [reply for task, reply in _replies().values() if task == "nugget_create"]
    parsed = sum(1 for reply in created if reply is not None and _parses_as_list(reply))
    per_query = {o["query_id"]: o["details"]["nuggets"] for o in replayed[0]["results"]["outputs"]
                 if "nuggets" in o["details"]}
    windows = {q: -(-d["n_segments"] // 10) for q, d in per_query.items()}  # window size 10, the default
    failed = {q: sum(1 for note in d["creation_notes"] if note.startswith("window ")) for q, d in per_query.items()}
    failed_windows = sum(failed.values())
    # a window stops asking at its first reply that parses: parsed replies = windows that succeeded
    assert parsed == sum(windows.values()) - failed_windows
    # what the run reports: nugget creation failed for every query, counted, never read as a score of 0
    outputs = replayed[0]["results"]["outputs"]
    assert parsed == 0 and failed_windows == len(per_query) == 4
    assert all(o["scores"].get("nuggets.vital") is None and "nuggets.vital" in o["errors"] for o in outputs)
    assert all(o["scores"]["nuggets.n_create_failed"] == failed[o["query_id"]] for o in outputs)
    for query_id, detail in per_query.items():
        if windows[query_id] and failed[query_id] == windows[query_id]:
            assert detail["creation_status"] == "failed" and detail["nuggets"] == []


# -- the judge-health report against classes counted here from the raw replies (docs/judge-health.md) ------------

def _umbrela_health(reply: str | None) -> str:
    if reply is None:
        return "failed"
    text = reply.strip().lower()
    lines = text.splitlines()
    scale_lines = [line for line in lines if re.match(r"^\W*[0-3]\s*[=:]\s*[a-z]", line)]
    if len(scale_lines) >= 3:
        return "echo"  # the grade scale restated
    kind = _umbrela_class(reply)
    if kind != "fallback":
        return {"explicit": "clean", "none": "invalid"}[kind]
    if lines and re.fullmatch(r"[^\w]*[0-3][^\w]*", lines[-1].strip()):
        return "clean"  # a bare grade on the last line: the basic prompt's own format
    last = list(re.finditer(r"[0-3]", text))[-1]
    line_start = text.rfind("\n", 0, last.start()) + 1
    if re.fullmatch(r"\W*", text[line_start:last.start()]) and re.match(r"\s*[.)]\s+\S", text[last.end():]):
        return "echo"  # the fallback took a list number of the rubric
    return "fallback"


def _support_health(reply: str | None) -> str:
    if reply is None:
        return "failed"
    found = sum(phrase in reply.lower() for phrase in ("full support", "partial support", "no support"))
    return ("invalid", "clean", "fallback", "echo")[found]


def _create_health(reply: str | None) -> str:
    if reply is None:
        return "failed"
    if not _parses_as_list(reply):
        return "invalid"
    value = ast.literal_eval(reply.replace("```python", "").replace("```", "").strip())
    return "echo" if set(value) == {"a", "b", "..."} else "clean"


def _judgments(task: str) -> list[list[str | None]]:
    """The replies of each judgment of a task, in order: re-asks share the messages and differ in the sample."""
    groups: dict[str, list[tuple[int, str | None]]] = {}
    replies = _replies()
    for line in _lines():
        if line["task"] == task:
            request = line["request"]
            messages = json.dumps(request["messages"])
            groups.setdefault(messages, [])
            if all(sample != request["sample"] for sample, _ in groups[messages]):
                groups[messages].append((request["sample"], replies[line["key"]][1]))
    return [[reply for _, reply in sorted(group)] for group in groups.values()]


def test_the_health_report_equals_the_classes_of_the_raw_replies(replayed: list[dict[str, Any]]) -> None:
    manifest = json.loads((replayed[0]["folder"] / "manifest.json").read_text())
    health = manifest["health"]["tasks"]
    for task, classify in (("umbrela", _umbrela_health), ("support", _support_health),
                           ("nugget_create", _create_health)):
        judgments = _judgments(task)
        counts = Counter(classify(replies[-1]) for replies in judgments)
        expected = {name: counts.get(name, 0) for name in ("clean", "fallback", "echo", "invalid", "failed")}
        expected["reasked"] = sum(1 for replies in judgments if len(replies) > 1)
        assert health[task]["counts"] == expected, task
        assert health[task]["judgments"] == len(judgments)
        assert health[task]["replies"] == sum(len(replies) for replies in judgments)
    assert manifest["health"]["healthy"] is False


def test_calibrating_the_recorded_judge_against_the_demo_labels(replayed: list[dict[str, Any]]) -> None:
    metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn (the dev extra) is not installed")
    from open_rag_eval.calibration.run import calibrate

    labels = CORPUS_DIR.parent.parent.parent / "configs" / "data" / "demo_labels"
    [umbrela, citation] = calibrate([labels / "umbrela_qrels.txt", labels / "citation_support.tsv"],
                                    [replayed[0]["folder"]], resamples=200)
    people = {(q, p): int(g) for q, _, p, g in (line.split() for line in
                                                (labels / "umbrela_qrels.txt").read_text().splitlines())}
    judge = {(o["query_id"], g["passage_id"]): g["grade"] for o in replayed[0]["results"]["outputs"]
             for g in o["details"]["umbrela"]["grades"]}
    graded = sorted(k for k in people if judge.get(k) is not None)
    failed = [k for k in people if k in judge and judge[k] is None]
    assert (umbrela.n_pairs, umbrela.n_judge_failed, umbrela.n_not_judged) == (
        len(graded), len(failed), len([k for k in people if k not in judge]))
    expected = metrics.cohen_kappa_score([judge[k] for k in graded], [people[k] for k in graded],
                                         labels=[0, 1, 2, 3], weights="quadratic")
    quadratic = next(s for s in umbrela.statistics if s.name == "kappa_quadratic")
    assert quadratic.value == pytest.approx(expected, abs=1e-12)
    assert quadratic.value < 0.2  # a 135M model does not grade relevance the way people do
    assert citation.n_judge_failed > citation.n_pairs  # most of its support replies carry no label


PROBE = CORPUS_DIR / "smollm2-probe.jsonl"


def test_the_injection_probe_replays_and_counts_what_the_raw_replies_show(tmp_path: Path) -> None:
    from open_rag_eval.calibration.injection import PAYLOADS
    from open_rag_eval.core.parsing import parse_support, parse_umbrela

    config = CORPUS_DIR / ".replay-probe.yaml"
    config.write_text((CORPUS_DIR / "smollm2-probe.yaml").read_text().replace("record:", "replay:"))
    try:
        runs = [subprocess.run([sys.executable, "-m", "open_rag_eval", "calibrate", "--injection", "--config",
                                str(config), "--sample", "10", "--output-dir", str(tmp_path / name)],
                               capture_output=True, text=True, timeout=600) for name in ("a", "b")]
    finally:
        config.unlink()
    for done in runs:
        assert done.returncode == 0, done.stderr
    assert (tmp_path / "a" / "injection.csv").read_text() == (tmp_path / "b" / "injection.csv").read_text()
    rows = {(r["task"], r["payload"]): r for r in
            csv.DictReader((tmp_path / "a" / "injection.csv").open())}

    # the verdict of every recorded request, read from the raw reply (None: failed, cut off or unparsed)
    verdicts: dict[str, Any] = {}
    for line in (json.loads(text) for text in PROBE.read_text().splitlines() if text.strip()):
        choice = json.loads(line["body"])["choices"][0] if line["status"] == 200 else None
        text = choice["message"]["content"] if choice and choice.get("finish_reason") != "length" else None
        user = line["request"]["messages"][-1][1]
        if line["task"] == "umbrela":
            grade, valid = parse_umbrela(text) if text else (0, False)
            verdicts[user] = grade if valid else None
        elif line["task"] == "support":
            verdicts[user] = parse_support(text) if text else None
    for task in ("umbrela", "support"):
        for payload in PAYLOADS[task]:
            moved = compared = 0
            for user, after in verdicts.items():
                if f"\n\n{payload.text}" not in user:
                    continue
                before = verdicts[user.replace(f"\n\n{payload.text}", "")]
                if before is not None and after is not None:
                    compared += 1
                    moved += before != after
            row = rows[(task, payload.name)]
            assert (int(row["compared"]), int(row["moved"])) == (compared, moved), (task, payload.name)
            assert int(row["compared"]) + int(row["no_verdict"]) == int(row["items"]) == 10
