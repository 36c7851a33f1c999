"""Lexical relevance: BM25 over the scope's statistics, neighbours, speakers and time cues."""

from __future__ import annotations

import pytest

from tavern_ledger.domain.ranking import (
    NEIGHBOUR_WEIGHT,
    CorpusStats,
    Document,
    asks_when,
    bm25,
    idf,
    named_speakers,
    relevance,
    says_when,
    with_neighbours,
)
from tavern_ledger.domain.text import term_counts


def counts(**docs: str) -> dict[str, dict[str, int]]:
    return {doc: dict(term_counts(text)) for doc, text in docs.items()}


def test_idf_weighs_rare_terms_more_and_is_never_negative() -> None:
    assert idf(1, 1000) > idf(100, 1000) > idf(900, 1000) > 0
    assert idf(50, 10) > 0  # a stale scope size below the term's count


def test_bm25_prefers_the_rare_term_and_saturates_repeats() -> None:
    docs = counts(a="pottery class on Sunday", b="class notes", c="class class class class")
    scores = bm25(["potteri", "class"], docs, CorpusStats(1000, {"potteri": 2, "class": 400}))
    assert scores["a"] > scores["c"] > scores["b"] > 0
    assert scores["c"] < 2 * scores["b"]  # four repeats are not four times the evidence


def test_bm25_without_statistics_uses_the_documents_themselves() -> None:
    docs = counts(a="tea and biscuits", b="coffee", c="tea")
    scores = bm25(["tea", "coffe"], docs, CorpusStats(0))
    assert scores["b"] > scores["c"] > 0  # coffee is rarer among the three


def test_neighbours_lift_an_answer_that_shares_no_word_with_the_question() -> None:
    docs = [
        Document("q", "What are you researching these days?", neighbours=()),
        Document("a", "Adoption agencies, it has been my dream", neighbours=("q",)),
        Document("x", "The weather was nice"),
    ]
    lifted = with_neighbours({"q": 2.0, "a": 0.0, "x": 0.0}, docs)
    assert lifted["a"] == pytest.approx(NEIGHBOUR_WEIGHT * 2.0)
    assert lifted["q"] == 2.0  # adjacency is symmetric, but "a" scored nothing
    assert lifted["x"] == 0.0


def test_neighbours_outside_the_candidates_are_ignored() -> None:
    assert with_neighbours({"a": 1.0}, [Document("a", "x", neighbours=("gone",))]) == {"a": 1.0}


def test_speakers_are_found_by_any_part_of_their_name() -> None:
    speakers = {"Caroline", "Melanie", "John_Smith", "Al"}
    assert named_speakers("What did Caroline's mom give her?", speakers) == {"Caroline"}
    assert named_speakers("when did smith move", speakers) == {"John_Smith"}
    assert named_speakers("How are al and Melanie related?", speakers) == {"Al", "Melanie"}
    assert named_speakers("what is the capital", speakers) == frozenset()


@pytest.mark.parametrize(
    ("query", "when"),
    [
        ("When did Melanie paint a sunrise?", True),
        ("What year did John start surfing?", True),
        ("How long ago was her birthday?", True),
        ("他们什么时候去的北京", True),
        ("What did Caroline research?", False),
    ],
)
def test_questions_that_ask_for_a_time(query: str, when: bool) -> None:
    assert asks_when(query) is when


def test_text_that_says_when() -> None:
    assert says_when("I went to a support group yesterday")
    assert says_when("We moved there in 2019")
    assert says_when("我们去年去过")
    assert not says_when("I love painting landscapes")


def test_relevance_is_normalised_and_boosts_the_named_speaker_and_time() -> None:
    docs = [
        Document("mel", "I painted a sunrise", speaker="Melanie"),
        Document("car", "I painted a sunrise", speaker="Caroline"),
        Document("old", "I painted a sunrise last year", speaker="Caroline"),
        Document("none", "Nice weather", speaker="Caroline"),
    ]
    scores = relevance("What did Caroline paint?", docs, CorpusStats(100, {"paint": 3}))
    assert max(scores.values()) == 1.0
    assert scores["car"] > scores["mel"]
    assert scores["none"] == 0.0
    timed = relevance("When did Caroline paint?", docs, CorpusStats(100, {"paint": 3}))
    assert timed["old"] == 1.0 > timed["car"]


def test_relevance_without_any_match_is_all_zero() -> None:
    docs = [Document("a", "tea"), Document("b", "coffee")]
    assert relevance("juice", docs, CorpusStats(10)) == {"a": 0.0, "b": 0.0}
    assert relevance("", [], CorpusStats(10)) == {}
