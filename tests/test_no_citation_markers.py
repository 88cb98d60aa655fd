"""Answers without a single citation marker (the ragas shape: question, answer, contexts): citation support is
undefined with its reason (never 0), one notice says how to add markers, and the diagnosis says the answers cite
nothing instead of "statements cite passages that do not support them"."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.core.missing import UNDEFINED, kind
from open_rag_eval.metrics.citation import NO_MARKERS_NOTICE, UNCITED

ANSWERS = [("What is the capital of France?", "Paris is the capital of France.", ["Paris is France's capital."]),
           ("Who wrote Hamlet?", "Shakespeare wrote it. It is a tragedy.", ["Hamlet is by Shakespeare.", "A play."]),
           ("Why is the sky blue?", "Rayleigh scattering.", ["Blue light scatters more."])]


def _run(tmp_path: Path, answers: list[tuple[str, str, list[str]]], caplog: pytest.LogCaptureFixture) -> Path:
    lines = [json.dumps({"question": q, "answer": a, "contexts": c}) for q, a, c in answers]
    (tmp_path / "ragas.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "c.yaml").write_text("input: ragas.jsonl\noutput_dir: out\njudge: {simulated: {seed: 1}, cache: false}"
                                     "\nevaluators: [{type: trec, metrics: [umbrela, citation]}]\n", encoding="utf-8")
    with caplog.at_level(logging.INFO):
        assert main(["eval", "--config", str(tmp_path / "c.yaml")]) == 0
    return tmp_path / "out"


def _rows(out: Path) -> dict[str, list[dict[str, object]]]:
    rows: dict[str, list[dict[str, object]]] = {}
    for item in json.loads((out / "results.json").read_text(encoding="utf-8"))["outputs"]:
        for metric in ("citation.precision", "citation.recall", "citation.f1", "citation.n_cited"):
            rows.setdefault(metric, []).append({"value": item["scores"].get(metric),
                                                "error": (item.get("errors") or {}).get(metric)})
    return rows


def test_answers_without_markers_leave_citation_support_undefined_with_one_notice(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]) -> None:
    out = _run(tmp_path, ANSWERS, caplog)
    rows = _rows(out)
    for metric in ("citation.precision", "citation.recall", "citation.f1"):
        assert rows[metric] == [{"value": None, "error": UNCITED}] * 3, metric  # never 0
    assert rows["citation.n_cited"] == [{"value": 0.0, "error": None}] * 3
    assert kind(UNCITED) == UNDEFINED
    notices = [r.getMessage() for r in caplog.records if r.getMessage() == NO_MARKERS_NOTICE]
    assert len(notices) == 1 and "[1]" in notices[0]
    printed = capsys.readouterr().out
    assert "- citations: the answers cite nothing (no citation markers), so citation support is undefined" in printed
    assert "statements cite passages that do not support them" not in printed
    report = (out / "report.html").read_text(encoding="utf-8")
    assert 'data-rule="trec_no_citations"' in report and 'data-rule="trec_citation_support"' not in report


def test_one_answer_with_a_marker_keeps_citation_support_measured(tmp_path: Path,
                                                                  caplog: pytest.LogCaptureFixture) -> None:
    answers = [*ANSWERS[:2], ("Why is the sky blue?", "Rayleigh scattering [1].", ["Blue light scatters more."])]
    rows = _rows(_run(tmp_path, answers, caplog))
    assert all(row["error"] is None and row["value"] is not None for row in rows["citation.f1"])
    assert [row["value"] for row in rows["citation.n_cited"]] == [0.0, 0.0, 1.0]
    assert NO_MARKERS_NOTICE not in [r.getMessage() for r in caplog.records]
