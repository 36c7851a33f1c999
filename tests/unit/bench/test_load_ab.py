"""How `bench/load_ab.py` orders its runs and counts rounds won (no stack started)."""

from __future__ import annotations

from bench.load_ab import order, wins


def test_the_order_turns_around_every_round() -> None:
    names = ["A", "B", "C"]
    assert [order(names, r) for r in (1, 2, 3, 4)] == [
        ["A", "B", "C"],
        ["C", "B", "A"],
        ["A", "B", "C"],
        ["C", "B", "A"],
    ]
    assert names == ["A", "B", "C"]


def test_wins_count_the_rounds_a_version_beat_the_first() -> None:
    runs = {
        "A": [{"turns/s": 70.0}, {"turns/s": 80.0}, {"turns/s": 75.0}],
        "B": [{"turns/s": 71.0}, {"turns/s": 79.0}, {"turns/s": 76.0}],
        "C": [{"turns/s": 60.0}, {"turns/s": 60.0}, {"turns/s": 60.0}],
    }
    assert wins(runs) == [
        "B beat A on turns/s in 2 of 3 rounds",
        "C beat A on turns/s in 0 of 3 rounds",
    ]
