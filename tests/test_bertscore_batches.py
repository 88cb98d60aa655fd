"""BERTScore batches are a property of the data: the same chunks of answer pairs whoever scores them (a local run, a
Ray model stage, a merge of shards), and scores handed in from elsewhere are used as they are."""

from __future__ import annotations

import asyncio

import pytest

from open_rag_eval.evaluators import consistency
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.consistency import (ConsistencyEvaluator, ConsistencyOptions, bertscore_chunks,
                                                  bertscore_texts, compared_runs)
from open_rag_eval.metrics.similarity import BertScores
from open_rag_eval.core.types import RAGOutput


def _out(qid: str, run: int, answer: str = "", error: str | None = None) -> RAGOutput:
    return RAGOutput(query_id=qid, query=f"question {qid}", run=run, answer_text=answer, error=error)


OUTPUTS = [
    _out("a", 1, "one"), _out("a", 2, "two"), _out("a", 3, "three"),  # 3 pairs
    _out("b", 2, "x"), _out("b", 1, ""), _out("b", 3, ""),  # runs sorted; (2, 3) of b has two empty answers
    _out("c", 1, "solo"), _out("c", 2, error="HTTP 500"),  # one answered run: not compared
    *[_out("d", run, f"answer {run}") for run in range(1, 6)],  # 10 pairs: more than a chunk
    _out("e", 1, "p"), _out("e", 2, "q"),  # 1 pair
]


def test_chunks_hold_whole_queries_in_first_seen_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(consistency, "BERTSCORE_CHUNK_PAIRS", 5)
    kept = compared_runs(OUTPUTS, 2)
    assert list(kept) == ["a", "b", "d", "e"] and [o.run for o in kept["b"]] == [1, 2, 3]
    chunks = bertscore_chunks(kept)
    assert chunks == [
        [("a", 0, 1), ("a", 0, 2), ("a", 1, 2), ("b", 0, 1), ("b", 1, 2)],  # b's runs 1 and 3 are both empty: no pair
        [("d", i, j) for i in range(5) for j in range(i + 1, 5)],  # a query with more pairs: a chunk of its own
        [("e", 0, 1)],
    ]
    assert bertscore_texts(kept, chunks[0])[3] == ("", "x")


def _evaluate(scored: BertScores | str) -> dict[str, tuple[float | None, str | None]]:
    evaluator = ConsistencyEvaluator(ConsistencyOptions(metrics=["bertscore"]))
    take = evaluator.contract().model_scores
    assert take is not None
    take(scored)
    result = asyncio.run(evaluator.evaluate(OUTPUTS, Context()))
    return {s.query_id: (s.value, s.error) for s in result.scores}


def test_scores_from_the_model_stage_are_used_as_they_are() -> None:
    todo = [pair for chunk in bertscore_chunks(compared_runs(OUTPUTS, 2)) for pair in chunk]
    f1 = [0.5, 0.25, 0.75, 0.125, 0.375] + [0.1 * k for k in range(10)] + [0.875]
    assert len(f1) == len(todo)
    scores = _evaluate(BertScores(f1, "m", 6, False))
    assert scores["a"] == (pytest.approx(0.5), None)  # (0.5 + 0.25 + 0.75) / 3
    assert scores["b"] == (pytest.approx(0.25), None)
    assert scores["d"] == (pytest.approx(0.45), None)
    assert scores["e"] == (0.875, None)
    assert scores["c"][0] is None and "skipped" in str(scores["c"][1])
    with pytest.raises(AssertionError, match="15 scores for 16 pairs"):
        _evaluate(BertScores(f1[:-1], "m", 6, False))


def test_a_model_the_stage_could_not_load_is_a_missing_value_with_its_reason() -> None:
    scores = _evaluate("BERTScore model 'x' cannot be loaded (OSError: offline)")
    assert {q for q, (value, error) in scores.items() if value is None and "cannot be loaded" in str(error)} \
        == {"a", "b", "d", "e"}


_SEEDED = """
import json, sys
from open_rag_eval.metrics.similarity import BertScoreOptions, _load, score_pairs
words = ["a", "photosynthesis", "of", "electrochemistry", "in", "thermodynamically", "is", "unquestionably"]
# 4 words each (ties in bert-score's sort by word count), of different numbers of tokens (different padding)
texts = [" ".join(words[(i * k + i // 8) % 8] for k in range(1, 5)) for i in range(16)]
pairs = [(texts[i], texts[(i * 5 + 3) % 16]) for i in range(16)]
options = BertScoreOptions(batch_size=3)
mine = score_pairs(pairs, options).f1
_, _, theirs = _load(options).scorer.score([a for a, _ in pairs], [b for _, b in pairs], batch_size=3)
print(json.dumps([mine, [float(v) for v in theirs.tolist()]]))
"""


def _seeded(seed: int) -> tuple[list[float], list[float]]:
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", _SEEDED], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    mine, theirs = json.loads(done.stdout.strip().splitlines()[-1])
    return mine, theirs


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_scores_do_not_depend_on_the_process_s_string_hashes() -> None:
    """Sentences of equal word count in several batches: bert-score's own score() batches them in the order of the
    process's string hashes, so its bits change with PYTHONHASHSEED; the run's scores (``score_pairs``) do not, and
    they are bert-score's F1 to float32 precision."""
    pytest.importorskip("bert_score")
    runs = [_seeded(seed) for seed in (1, 2, 3)]
    assert all(mine == runs[0][0] for mine, _ in runs)
    assert len({tuple(theirs) for _, theirs in runs}) > 1  # what the run's scores no longer do
    assert runs[0][0] == pytest.approx(runs[0][1], abs=1e-6)
