"""Diagnosis: rules that turn patterns in a run's metric means into advice.

    from open_rag_eval.diagnosis import diagnose, DiagnosisOptions
    found = diagnose({"golden.hit@10": 0.42, "golden.mrr": 0.18}, DiagnosisOptions())
    found.findings      # [Finding(rule="low_recall", area="retrieval", text=..., source="ResearchMate ..."), ...]
    found.unchecked     # [("low_faithfulness", "generation.faithfulness / ... is not in this run"), ...]

Rules and their default thresholds (with the requirement each comes from) are in ``rules``; the config's
``diagnosis:`` section (``options``) switches rules off, moves thresholds and names other metrics. The judge's health
is read first (``check``). The console summary and report.html show the result (docs/diagnosis.md).
"""

from __future__ import annotations

from open_rag_eval.diagnosis.check import Diagnosis, Finding, diagnose
from open_rag_eval.diagnosis.options import DiagnosisOptions, options_from_manifest
from open_rag_eval.diagnosis.rules import RULES, Check, Rule
from open_rag_eval.diagnosis.text import diagnosis_lines, unchecked_summary

__all__ = ["RULES", "Check", "Diagnosis", "DiagnosisOptions", "Finding", "Rule", "diagnose", "diagnosis_lines",
           "options_from_manifest", "unchecked_summary"]
