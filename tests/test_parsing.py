import pytest

from open_rag_eval.core.parsing import (
    UMBRELA_PATTERNS,
    parse_labels,
    parse_list,
    parse_no_answer,
    parse_support,
    parse_umbrela,
    strip_reasoning,
)

# docs/methods.md (UMBRELA parsing): raw completion -> (trec2024, head); valid unless the grade is None (grade 0, invalid)
UMBRELA_CASES = [
    ("##final score: 2", 2, 2),
    ("M: 2, T: 1, O: 3", 3, 3),
    ('{"O": 2}', 2, 2),
    ("The passage refers to 2 of the aspects. ##final score: 1", 2, 2),
    ("##final score: 3\n##final score: 1", 1, 1),
    ("score: 2 (M=2, T=1)", 1, 2),
    ("Given all aspects, I would assign it a score of 3.", 3, 3),
    ("final score - 2", 2, 2),
    ("Relevance category 1", 1, 1),
    ("0", 0, 0),
    ("4", None, None),
    ("I cannot determine the relevance.", None, None),
    ("", None, None),
]


@pytest.mark.parametrize(("reply", "trec2024", "head"), UMBRELA_CASES)
def test_umbrela_canned_replies(reply: str, trec2024: int | None, head: int | None) -> None:
    for profile, expected in (("trec2024", trec2024), ("head", head)):
        assert parse_umbrela(reply, profile) == ((0, False) if expected is None else (expected, True))


def test_umbrela_pattern_lists() -> None:
    assert len(UMBRELA_PATTERNS["trec2024"]) == 24  # 23 patterns, "relevance category" listed twice
    assert len(UMBRELA_PATTERNS["head"]) == 30
    assert UMBRELA_PATTERNS["trec2024"][-1] == r"\n*(0|1|2|3)"


def test_umbrela_character_range_quirk() -> None:
    assert parse_umbrela("final score; 3\nfinal score = 1") == (1, True)  # ';' and '=' lie in ':'..'='
    assert parse_umbrela("final score < 2") == (2, True)


def test_nugget_list_parser() -> None:
    assert parse_list('```python\n["a", "b"]\n```') == ["a", "b"]
    assert parse_list("Updated Nugget List: [\"a\"]") is None
    assert parse_list('"just a string"') is None  # not a list of str: documented deviation
    assert parse_list("[1, 2]") is None
    assert parse_list("not a list") is None
    assert parse_list("['a', \"b's\"]") == ["a", "b's"]


def test_label_parser_lowercases_and_checks_length() -> None:
    assert parse_labels('["Vital", "OKAY"]', 2) == ["vital", "okay"]
    assert parse_labels('["vital"]', 2) is None
    assert parse_labels("['support', 'partial_support', 'not_support']", 3) == [
        "support", "partial_support", "not_support"]
    assert parse_labels('["supported"]', 1) == ["supported"]  # stored as given; earns 0


@pytest.mark.parametrize(("reply", "label"), [
    ("Full Support", "FS"), ("**Partial Support**", "PS"), ("No Support.", "NS"),
    ("There is no full support here.", "FS"), ("Not supported", None), ("Unsupported", None), ("", None),
])
def test_support_canned_replies(reply: str, label: str | None) -> None:
    assert parse_support(reply) == label


@pytest.mark.parametrize(("reply", "label"), [
    ("yes", "yes"), ('"No"', "no"), ("Yes, it attempts", None), ("`yes`.", "yes"), ("maybe", None),
])
def test_no_answer_canned_replies(reply: str, label: str | None) -> None:
    assert parse_no_answer(reply) == label


def test_reasoning_blocks_are_removed() -> None:
    assert strip_reasoning("<think>final score: 0</think>##final score: 3") == "##final score: 3"
    assert strip_reasoning("<think>unfinished") == ""
