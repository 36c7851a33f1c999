"""A person's message cut into claims: sentences and clauses with a subject of their own, the
kind of each, and the subject a clause only implies made explicit (English and Chinese)."""
# ruff: noqa: RUF001 - full-width punctuation is test data

from __future__ import annotations

import pytest

from tavern_ledger.domain.segments import MAX_CLAIMS, segments, subject_of


def _cut(text: str, correction: bool = False) -> list[tuple[str, str]]:
    return [(s.kind, s.text) for s in segments(text, correction)]


def test_a_message_of_two_facts_is_two_claims_with_the_subject_named() -> None:
    assert _cut("Hi! My sister's name is Lena and she lives in Porto.") == [
        ("chatter", "Hi!"),
        ("fact", "My sister's name is Lena"),
        ("fact", "My sister lives in Porto."),
    ]
    [_, _, lives] = segments("Hi! My sister's name is Lena and she lives in Porto.")
    assert lives.said == "she lives in Porto."


def test_chinese_clauses_name_the_subject_a_pronoun_stands_for() -> None:
    assert _cut("我妹妹叫丽娜，她住在波尔图。") == [
        ("fact", "我妹妹叫丽娜"),
        ("fact", "我妹妹住在波尔图。"),
    ]


def test_questions_small_talk_directives_and_preferences_are_told_apart() -> None:
    assert _cut("Thanks! Always answer in French please. I love painting. Where do I live?") == [
        ("chatter", "Thanks!"),
        ("directive", "Always answer in French please."),
        ("preference", "I love painting."),
        ("question", "Where do I live?"),
    ]
    assert [k for k, _ in _cut("你好！我住在北京。以后请用英文回答。你知道我住哪吗？")] == [
        "chatter",
        "fact",
        "directive",
        "question",
    ]
    assert _cut("Where does my sister live") == [("question", "Where does my sister live")]


def test_every_clause_of_a_correcting_message_that_states_something_corrects() -> None:
    assert _cut("Correction: my sister lives in Lisbon now, not Porto.", correction=True) == [
        ("correction", "my sister lives in Lisbon now, not Porto.")
    ]
    cut = _cut(
        "Correction: Jesse and Monique attended different universities; Jesse attended RISD, "
        "and Monique attended Stanford University.",
        correction=True,
    )
    assert [k for k, _ in cut] == ["correction"] * 3


@pytest.mark.parametrize(
    "text",
    [
        "Kelvin Crompton is fluent in three languages: English, French, and Mandarin.",
        "Christina Willard, Peter Hodgekin, and Morgan Bowden all attended the same event.",
        "Jamis Willingston Jr. is fluent in English, Spanish, and German.",
        "Jesse Towsend and Monique Hamilten both attended the University of Michigan.",
    ],
)
def test_lists_names_and_abbreviations_stay_one_claim(text: str) -> None:
    assert _cut(text) == [("fact", text)]


def test_subjects_are_read_where_a_clause_names_them_first() -> None:
    assert subject_of("My sister's name is Lena") == "My sister"
    assert subject_of("Paulo Kinn developed the app") == "Paulo Kinn"
    assert subject_of("I live in Paris") == ""
    assert subject_of("我妹妹叫丽娜") == "我妹妹"


def test_a_long_message_keeps_its_first_claims() -> None:
    text = " ".join(f"Fact number {i} is here." for i in range(MAX_CLAIMS + 10))
    assert len(segments(text)) == MAX_CLAIMS
