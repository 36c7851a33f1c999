"""How `bench/load_ab.py` orders its runs, counts rounds won and prints a round (no stack
started)."""

from __future__ import annotations

import pytest

from bench.costsheet import CostSheet
from bench.load_ab import order, process_table, version_envs, wins


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


def test_a_round_prints_the_cost_sheets_process_table_whole() -> None:
    sheet = CostSheet(
        turns=100,
        seconds=2.0,
        cpu_ms={"loop": 3.5, "ledger": 3.0},
        streams={"SESSIONS": (15.6, 13_000.0), "LEDGER": (1.7, 900.0)},
        bus={},
        clients={},
        database={"xact_commit": 5.5},
        statements=None,
        top_statements=[],
        consumers={},
        lags=[],
        machine={"busy": 0.9, "steal": 0.0},
    )
    head = process_table(sheet.lines())
    assert head[0] == "cost per turn (100 turns in 2.0 s)"
    assert any(line.split()[:2] == ["loop", "3.5"] for line in head)
    assert head[-1].startswith("  machine, all cores: busy 90%")
    assert not any("stream" in line for line in head)


def test_settings_go_to_every_version_or_to_the_one_named() -> None:
    envs = version_envs(
        ["A", "B"],
        ["TAVERN_LLM_OFFLINE_WORDS_PER_S=30"],
        ["A:TAVERN_LOOP_CHUNK_INTERVAL_S=0.05"],
    )
    assert envs == {
        "A": {"TAVERN_LLM_OFFLINE_WORDS_PER_S": "30", "TAVERN_LOOP_CHUNK_INTERVAL_S": "0.05"},
        "B": {"TAVERN_LLM_OFFLINE_WORDS_PER_S": "30"},
    }


@pytest.mark.parametrize(
    ("common", "per_version"),
    [(["WORDS=30"], []), (["TAVERN_X"], []), ([], ["C:TAVERN_X=1"]), ([], ["A:X=1"])],
)
def test_a_setting_that_names_no_version_or_no_tavern_key_is_refused(
    common: list[str], per_version: list[str]
) -> None:
    with pytest.raises(SystemExit):
        version_envs(["A", "B"], common, per_version)
