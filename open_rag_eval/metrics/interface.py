"""What the metrics floor offers the evaluators: the generation metric interface and the judged reply.

``_generation`` and ``_judging`` are the metrics package's own modules; another package imports their names from
here (a private name of one package is never imported by another: ``tests/test_architecture.py``).
"""

from __future__ import annotations

from open_rag_eval.metrics._generation import GenerationMetric, expects_refusal, reference_of
from open_rag_eval.metrics._judging import CALL_FAILED, Asked

__all__ = ["CALL_FAILED", "Asked", "GenerationMetric", "expects_refusal", "reference_of"]
