"""The semantic channel's pure rules: what is embedded, how distances become scores, and which
search a scope gets."""

from __future__ import annotations

from tavern_ledger.domain.similarity import (
    EMBEDDED_CHARS,
    EXACT_SCOPE_VECTORS,
    embedded_text,
    exact_search,
    score_of,
)


def test_score_is_the_cosine_similarity_clamped_to_zero_and_one() -> None:
    assert score_of(0.0) == 1.0
    assert score_of(0.25) == 0.75
    assert score_of(1.0) == 0.0
    assert score_of(1.6) == 0.0  # opposite meaning: as good as unrelated
    assert score_of(-1e-7) == 1.0  # rounding of identical vectors


def test_embedded_text_folds_whitespace_and_keeps_the_head_of_a_long_row() -> None:
    assert embedded_text("  My sister\n lives\tin Porto ") == "My sister lives in Porto"
    long = "word " * 5000
    assert len(embedded_text(long)) == EMBEDDED_CHARS
    assert embedded_text("我妹妹住在波尔图") == "我妹妹住在波尔图"


def test_small_scopes_are_searched_exactly_and_large_ones_through_the_graph() -> None:
    assert exact_search(0)
    assert exact_search(EXACT_SCOPE_VECTORS)
    assert not exact_search(EXACT_SCOPE_VECTORS + 1)
