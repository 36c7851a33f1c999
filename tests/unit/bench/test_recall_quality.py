"""The recall-quality bench's pure parts: evidence labels, Recall@k, fusion, dates."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bench.recall_quality import normalise_labels, recall_at, rrf, session_time, share_present

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
