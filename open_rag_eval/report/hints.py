"""Short diagnosis hints on the TREC metrics, for the report's per-query drill-down: ``open_rag_eval.diagnosis.trec``
(the run-level diagnosis, every rule, is ``open_rag_eval.diagnosis.diagnose``)."""

from __future__ import annotations

from open_rag_eval.diagnosis.trec import answer_evidence, diagnose, run_means

__all__ = ["answer_evidence", "diagnose", "run_means"]
