"""Lexical answer checks: literal numbers and edge cases."""

from __future__ import annotations

import pytest

from open_rag_eval import prompts
from open_rag_eval.metrics import lexical
from open_rag_eval.metrics.lexical import (
    citation_compliance,
    content_tokens,
    english_stopwords,
    has_sources_section,
    is_refusal,
    keyword_coverage,
    keyword_score,
    refusal_confusion,
    token_support,
)


def test_content_tokens_drop_stopwords_and_lowercase() -> None:
    assert content_tokens("The Capital of France is PARIS, isn't it?") == ["capital", "france", "paris"]


def test_the_stopword_list_is_bundled_versioned_data() -> None:
    entry = next(e for e in prompts.manifest() if e["id"] == "lexical.stopwords_en")
    assert entry["licence"] == "Apache-2.0" and "written by this project" in entry["source"]
    assert prompts.prompt_hashes()["lexical.stopwords_en"] == entry["sha256"]  # so the run manifest records it
    words = english_stopwords()
    assert len(words) == 153
    assert {"the", "doesn", "t", "won", "ourselves", "because"} <= words
    assert not {"model", "not_a_word", "doesn't", "no:"} & words  # no apostrophe forms, no category labels


def test_a_tampered_stopword_list_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    entries = tuple({**e, "sha256": "0" * 64} if e["id"] == "lexical.stopwords_en" else e for e in prompts.manifest())
    monkeypatch.setattr(prompts, "manifest", lambda: entries)
    prompts.load.cache_clear()
    english_stopwords.cache_clear()
    try:
        with pytest.raises(prompts.TemplateIntegrityError, match="stopwords_en"):
            token_support("Paris", ["paris"])
    finally:
        prompts.load.cache_clear()
        english_stopwords.cache_clear()


def test_groundedness_by_hand_with_the_bundled_stopwords() -> None:
    # seed steps: words only, lower-cased -> it s the model s attention that doesn t fail and it won t;
    # stopwords removed -> model, attention, fail; in the context's words: model, attention (not "failures") -> 2/3
    answer = "It's the model's attention that doesn't fail, and it won't."
    assert content_tokens(answer) == ["model", "attention", "fail"]
    assert token_support(answer, ["Attention failures in the model"]) == pytest.approx(2 / 3)
    # "Where" / "Doesn't" are stopwords but "Paris" and "capital" twice are content: 3 of 4 (not "berlin")
    assert token_support("Where? Paris doesn't; capital, capital, Berlin.", ["the capital is paris"]) == 0.75
    assert lexical.english_stopwords() is english_stopwords()  # read once


def test_groundedness_counts_repeated_tokens() -> None:
    # content tokens: paris, capital, paris, berlin -> 3 of 4 in the context
    assert token_support("Paris is the capital; Paris, not Berlin.", ["paris is a capital city"]) == 0.75


def test_groundedness_edge_cases() -> None:
    assert token_support("", ["anything"]) is None  # empty answer: no value
    assert token_support("the of and", ["x"]) is None  # stopwords only
    assert token_support("Paris", []) == 0.0  # no context
    assert token_support("Paris", ["PARIS."]) == 1.0
    assert token_support("Paris rocks", ["paris"], stopwords=frozenset({"rocks"})) == 1.0


def test_keyword_coverage() -> None:
    share, found = keyword_coverage("Jane Austen wrote it in 1813.", ["jane austen", "1813", "Bronte"])
    assert share == pytest.approx(2 / 3) and found == ["jane austen", "1813"]
    assert keyword_coverage("a fragment of text", ["rag"]) == (0.0, [])  # whole words only
    assert keyword_coverage("8,849 metres", ["8,849"]) == (1.0, ["8,849"])
    assert keyword_coverage("Jane\nAusten", ["Jane Austen"])[0] == 1.0


def test_keyword_coverage_without_keywords_or_answer() -> None:
    assert keyword_coverage("anything", []) == (None, [])
    assert keyword_coverage("", ["paris"]) == (0.0, [])


def test_keyword_score() -> None:
    assert keyword_score(1.0, 0.5) == 0.75
    assert keyword_score(1.0, 0.5, alpha=0.2) == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Answer [1].\n\nSources:\n[1] doc", True),
        ("Answer.\n**Sources**\n- doc", True),
        ("Answer.\n## Sources\n", True),
        ("Answer.\nsources: doc1", True),
        ("Sources say that the answer is yes.", False),
        ("Answer without a list.", False),
        ("", False),
    ],
)
def test_sources_section(text: str, expected: bool) -> None:
    assert has_sources_section(text) is expected


def test_sources_header_is_configurable() -> None:
    assert has_sources_section("Text\nReferences:\n[1] x", header="References")
    assert not has_sources_section("Text\nReferences:\n[1] x")


def test_citation_compliance() -> None:
    assert citation_compliance(True, 2, 2) == 1.0
    assert citation_compliance(True, 1, 2) == 0.5
    assert citation_compliance(False, 3, 2) == 0.5
    assert citation_compliance(False, 0, 1) == 0.0
    assert citation_compliance(False, 0, 0) == 0.5


@pytest.mark.parametrize(
    "text",
    [
        "NO_ANSWER",
        "",
        "   ",
        "I don't know.",
        "I\u2019m unable to answer this question from the sources.",
        "The provided context does not contain information about gold prices.",
        "There is not enough information to answer.",
        "This question cannot be answered from the passages.",
        "The price is not mentioned in the provided documents.",
    ],
)
def test_refusals_detected(text: str) -> None:
    assert is_refusal(text)


@pytest.mark.parametrize(
    "text",
    [
        "Paris is the capital of France.",
        "Water boils at 100 C. The sources do not contain information about pressure.",  # refusal after sentence 1
        "No, the capital is Paris.",
        "Information about Paris: it is the capital.",
    ],
)
def test_answers_not_taken_for_refusals(text: str) -> None:
    assert not is_refusal(text)


def test_refusal_confusion() -> None:
    pairs = [(True, True), (True, False), (False, False), (False, False), (False, True)]
    assert refusal_confusion(pairs) == {"refused_expected": 1, "answered_expected": 2, "refused_answerable": 1,
                                        "answered_unanswerable": 1}




@pytest.mark.parametrize(("text", "entries"), [
    ("Answer [1].\n\n**Sources:**\n- [1] a.pdf\n- b.pdf\n", ["[1] a.pdf", "b.pdf"]),
    ("Answer.\n### Sources\n1. a.pdf\n2. a.pdf\n3. c.pdf", ["a.pdf", "c.pdf"]),
    ("Answer.\nSources: a.pdf, b.pdf; c.pdf", ["a.pdf", "b.pdf", "c.pdf"]),
    ("Answer.\nSources:\nReport, page 3\nMemo, 2024\n", ["Report, page 3", "Memo, 2024"]),
    ("Answer without a section.", []),
    ("Answer.\n**Sources:**\n", []),
])
def test_sources_entries(text: str, entries: list[str]) -> None:
    from open_rag_eval.metrics.lexical import sources_entries

    assert sources_entries(text) == entries
