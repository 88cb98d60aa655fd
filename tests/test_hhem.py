"""HHEM: our loader reads a tiny HHEM-layout checkpoint exactly; batching, chunking, truncation, failures."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from open_rag_eval.hhem import ModelSpec, get_model, plan_windows, predict, score_pairs, split_premise
from open_rag_eval.hhem.tiny import TINY_WORDS, tiny_model, tiny_tokenizer, write_tiny_hhem
from open_rag_eval.metrics.hallucination import HallucinationMetric, HallucinationOptions
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput

PAIRS = [
    ("The Eiffel tower is located in Paris .", "The tower was built in 1889 ."),
    ("Paris is the capital of France . The river Seine flows in the city .", "Berlin is the capital of France ."),
    ("The sky is blue because the atmosphere scatters sunlight .", "The sky is blue ."),
    ("The Louvre is a famous art museum in Paris visited by million people .", "The Louvre is in Paris ."),
    ("It was built in 1889 .", "The Eiffel tower is a famous landmark of the world ."),
]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_hhem(tmp_path_factory.mktemp("hhem"), seed=7)


@pytest.fixture(scope="module")
def loaded(tiny_dir: Path):
    return get_model(ModelSpec(model_path=str(tiny_dir), device="cpu"))


def reference_scores(pairs, prompt: str) -> list[float]:
    """The tiny model scored in memory, one pair at a time, before any save/load."""
    tokenizer = tiny_tokenizer()
    model = tiny_model(len(tokenizer), seed=7)
    scores = []
    for premise, hypothesis in pairs:
        encoded = tokenizer(prompt.format(text1=premise, text2=hypothesis), return_tensors="pt")
        with torch.no_grad():
            logits = model(input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]).logits
        scores.append(float(torch.softmax(logits[0, 0], dim=-1)[1]))
    return scores


def output(query_id: str, premise: str, answer: str, **kwargs) -> RAGOutput:
    passages = (Passage(id="p1", text=premise),) if premise else ()
    parts = (AnswerPart(text=answer),) if answer else ()
    return RAGOutput(query_id=query_id, query="q", passages=passages, answer=parts, **kwargs)


def test_plan_windows_cover_with_overlap() -> None:
    assert plan_windows(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert plan_windows(100, 35, 8) == [(0, 35), (27, 62), (54, 89), (81, 100)]
    assert plan_windows(4, 4, 3) == [(0, 4)]
    with pytest.raises(ValueError):
        plan_windows(10, 4, 4)


def test_reload_gives_the_same_scores_as_before_saving(loaded) -> None:
    model = loaded.model
    assert model.transformer.encoder.embed_tokens.weight is model.transformer.shared.weight
    assert loaded.prompt.startswith("<pad> Determine if the hypothesis is true given the premise?")
    got = predict(loaded, PAIRS, batch_size=1)
    assert got == pytest.approx(reference_scores(PAIRS, loaded.prompt), abs=1e-6)
    assert len({round(value, 4) for value in got}) == len(PAIRS)  # not a constant: the weights are the real ones


def test_pytorch_bin_and_hub_cache_layout_load_alike(tiny_dir: Path, loaded, tmp_path: Path) -> None:
    binary = tmp_path / "bin"
    binary.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tiny_dir / name, binary / name)
    from safetensors.torch import load_file

    torch.save(load_file(str(tiny_dir / "model.safetensors")), binary / "pytorch_model.bin")
    snapshot = tmp_path / "hub" / "models--acme--hhem" / "snapshots" / ("a" * 40)
    shutil.copytree(tiny_dir, snapshot)
    (tmp_path / "hub" / "models--acme--hhem" / "refs").mkdir()
    (tmp_path / "hub" / "models--acme--hhem" / "refs" / "main").write_text("a" * 40)
    expected = predict(loaded, PAIRS, batch_size=4)
    for spec in (ModelSpec(model_path=str(binary), device="cpu"),
                 ModelSpec(model_name="acme/hhem", cache_dir=str(tmp_path / "hub"), device="cpu")):
        assert predict(get_model(spec), PAIRS, batch_size=4) == pytest.approx(expected, abs=1e-6)


def test_model_is_loaded_once_per_process(tiny_dir: Path, loaded) -> None:
    assert get_model(ModelSpec(model_path=str(tiny_dir), device="cpu")) is loaded


def test_batching_equals_one_by_one(loaded) -> None:
    one_by_one = predict(loaded, PAIRS, batch_size=1)
    assert predict(loaded, PAIRS, batch_size=3) == pytest.approx(one_by_one, abs=1e-5)
    assert predict(loaded, PAIRS, batch_size=32) == pytest.approx(one_by_one, abs=1e-5)


def long_premise(n_words: int) -> str:
    return " ".join(TINY_WORDS[i % len(TINY_WORDS)] for i in range(n_words))


HYPOTHESIS = "the tower was built 1889"  # 5 tokens; <pad> + prompt (14) + hypothesis + </s> = 21 tokens


def test_long_premise_is_chunked_and_scored_by_its_best_window(loaded) -> None:
    premise = long_premise(100)  # budget = 64 - 21 - 8 = 35 tokens, overlap 8:
    # windows (0, 35), (27, 62), (54, 89), (81, 100)
    split = split_premise(loaded, premise, HYPOTHESIS, max_tokens=64, overlap=8, mode="chunk")
    assert split.chunked and len(split.premises) == 4
    assert split.premises[0] == long_premise(35)
    assert split.premises[1].startswith(" ".join(premise.split()[27:29]))
    for chunk in split.premises:
        assert len(loaded.tokenizer(loaded.prompt.format(text1=chunk, text2=HYPOTHESIS))["input_ids"]) <= 64
    [result] = score_pairs(loaded, [(premise, HYPOTHESIS)], batch_size=8, max_tokens=64, overlap=8, mode="chunk")
    per_chunk = predict(loaded, [(chunk, HYPOTHESIS) for chunk in split.premises], batch_size=1)
    assert result.chunk_scores == pytest.approx(per_chunk, abs=1e-5)
    assert result.score == max(result.chunk_scores) and result.n_chunks == 4 and result.chunked


def test_truncate_mode_scores_the_first_window_only(loaded) -> None:
    premise = long_premise(100)
    [result] = score_pairs(loaded, [(premise, HYPOTHESIS)], batch_size=8, max_tokens=64, overlap=8, mode="truncate")
    assert result.truncated and not result.chunked and result.n_chunks == 1
    assert result.score == pytest.approx(predict(loaded, [(long_premise(35), HYPOTHESIS)], 1)[0], abs=1e-6)


def test_an_answer_that_fills_the_context_fails_with_the_fix(loaded) -> None:
    [result] = score_pairs(loaded, [("paris", long_premise(60))], batch_size=8, max_tokens=64, overlap=8, mode="chunk")
    assert result.score is None and "raise hallucination.max_tokens" in result.error


def test_metric_rows_details_and_threshold(tiny_dir: Path) -> None:
    outputs = [output("short", PAIRS[0][0], PAIRS[0][1]), output("long", long_premise(100), HYPOTHESIS)]
    options = HallucinationOptions(model_path=str(tiny_dir), device="cpu", max_tokens=64, overlap_tokens=8)
    result = asyncio.run(HallucinationMetric(options).score(outputs))
    scores = {(s.query_id, s.metric): s.value for s in result.scores}
    details = {d.query_id: d.data for d in result.details}
    assert details["short"] == {"backend": "hhem", "chunked": False, "n_chunks": 1, "threshold": 0.5,
                                "truncated": False, "chunk_scores": [round(scores[("short", "hhem.score")], 6)]}
    assert details["long"]["chunked"] is True and details["long"]["n_chunks"] == 4
    for query_id in ("short", "long"):
        value = scores[(query_id, "hhem.score")]
        assert 0 < value < 1
        assert scores[(query_id, "hhem.hallucinated")] == (1.0 if value < 0.5 else 0.0)
    never = HallucinationOptions(model_path=str(tiny_dir), device="cpu", threshold=0.0)
    always = HallucinationOptions(model_path=str(tiny_dir), device="cpu", threshold=1.0)
    for options, expected in ((never, 0.0), (always, 1.0)):
        rows = asyncio.run(HallucinationMetric(options).score(outputs[:1])).scores
        assert [s.value for s in rows if s.metric == "hhem.hallucinated"] == [expected]


def test_unscorable_outputs_fail_with_their_reason(tmp_path: Path) -> None:
    outputs = [output("empty", "Paris .", ""), output("nopassages", "", "Paris ."),
               output("broken", "", "", error="connector timed out")]
    options = HallucinationOptions(model_path=str(tmp_path / "missing"))
    result = asyncio.run(HallucinationMetric(options).score(outputs))
    errors = {(s.query_id, s.metric): s.error for s in result.scores}
    assert errors[("empty", "hhem.score")] == "no answer to score (the answer is empty)"
    assert errors[("nopassages", "hhem.hallucinated")] == "no passages to check the answer against"
    assert errors[("broken", "hhem.score")] == "no output to score: connector timed out"
    assert all(s.value is None for s in result.scores) and not result.details


def test_missing_weights_offline_fail_every_output_with_an_actionable_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "empty-home"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    metric = HallucinationMetric(HallucinationOptions())
    outputs = [output("a", "Paris .", "Paris ."), output("b", "Berlin .", "Paris .")]
    with caplog.at_level(logging.WARNING, logger="open_rag_eval.metrics.hallucination"):
        first = asyncio.run(metric.score(outputs))
        asyncio.run(metric.score(outputs))
        said_once = len([r for r in caplog.records if "HHEM weights unavailable" in r.getMessage()])
        asyncio.run(HallucinationMetric(HallucinationOptions()).score(outputs))  # the next run in this process
    assert len(first.scores) == 4 and all(s.value is None for s in first.scores) and not first.details
    message = first.scores[0].error
    assert "vectara/hallucination_evaluation_model" in message and "not in the cache" in message
    assert "hallucination.model_path" in message and "HF_HOME" in message and "hallucination.tokenizer" in message
    assert said_once == 1  # once per run, not once per batch ...
    assert len([r for r in caplog.records if "HHEM weights unavailable" in r.getMessage()]) == 2  # ... nor per process


def test_options_reject_unknown_keys_and_bad_devices() -> None:
    with pytest.raises(ValueError):
        HallucinationOptions(device="tpu")
    with pytest.raises(ValueError):
        HallucinationOptions(max_chars=8192)
