"""The recall-quality bench's pure parts: evidence labels, Recall@k, fusion, dates."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.recall_quality import (
    DENSE_INSTALL,
    SETUPS,
    Question,
    System,
    normalise_labels,
    recall_at,
    rrf,
    session_time,
    share_present,
    superseded_counts,
    table,
    verdicts,
)

TURNS = ["D1:3", "D8:6", "D9:17", "D11:26", "D30:5"]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (["D1:3"], ("D1:3",)),
        (["D8:6; D9:17"], ("D8:6", "D9:17")),
        (["D:11:26"], ("D11:26",)),
        (["D30:05"], ("D30:5",)),
        (["D", "D10:19", ""], ()),  # malformed, or naming no turn
        (["D1:3", "D1:03", "D8:6,D1:3"], ("D1:3", "D8:6")),
    ],
)
def test_evidence_labels_are_normalised(labels: list[str], expected: tuple[str, ...]) -> None:
    assert normalise_labels(labels, TURNS) == expected


def test_recall_at_k_counts_evidence_among_the_first_k() -> None:
    ranked = ["a", "b", "c", "d"]
    assert recall_at(ranked, ["a", "d"], 2) == 0.5
    assert recall_at(ranked, ["a", "d"], 4) == 1.0
    assert recall_at([], ["a"], 5) == 0.0
    assert share_present({"x", "a"}, ["a", "b"]) == 0.5


def test_rrf_rewards_agreement() -> None:
    assert rrf([["a", "b", "c", "d"], ["d", "b", "c", "a"]])[0] == "b"
    assert rrf([["a", "b"], ["a"]]) == ["a", "b"]


def test_session_dates_parse() -> None:
    assert session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)


def test_the_headline_row_changes_no_setting_and_the_other_says_what_it_changes() -> None:
    headline, *others = SETUPS
    assert headline.changed == {}
    assert "default" in headline.name
    for setup in others:
        assert setup.changed
        assert "CHANGED" in setup.name
        assert all(value in setup.name for value in map(str, setup.changed.values()))


def _questions() -> list[Question]:
    return [Question(f"q{c}", c, (f"D1:{c}",)) for c in (1, 2, 3, 4)]


def test_a_baseline_that_is_not_installed_is_a_row_that_says_so() -> None:
    found = System("ledger", rankings=[["D1:1"], ["D1:2"], ["D1:3"], ["D1:9"]])
    missing = System("MiniLM dense", missing=f"not installed: {DENSE_INSTALL}")
    text = table([found, missing], _questions())
    assert f"MiniLM dense{'':28}  not installed: {DENSE_INSTALL}" in text
    assert "pip install" in DENSE_INSTALL


def test_the_headline_verdicts_name_both_goals() -> None:
    good = System("ledger", rankings=[["D1:1"], ["D1:2"], ["D1:3"], ["D1:4"]])
    poor = System("ledger", rankings=[["D1:1"], ["D1:2"], ["D1:9"], ["D1:9"]])
    assert verdicts(good, _questions()) == "R@10 ≥66 met (100.0), R@5 ≥58 met (100.0)"
    assert verdicts(poor, _questions()) == "R@10 ≥66 MISSED (50.0), R@5 ≥58 MISSED (50.0)"


def test_superseded_turns_are_counted_with_those_questions_cite() -> None:
    found = System("ledger", superseded={"D1:1", "D1:7", "D1:8"})
    assert superseded_counts(found, _questions()) == {"turns": 3, "cited": 1}
