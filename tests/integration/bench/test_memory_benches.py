"""The memory benches' harnesses against the real stack (ledger and consolidator as deployed on a
fresh nats-server and PostgreSQL): a few contradiction cases of our corpus, two Letta-format cases
written here (never the Letta data), and a tiny LoCoMo-shaped chat."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bench import contradiction, recall_quality
from bench.letta_cases import LettaCase
from bench.recall_quality import Conversation, Question, Turn

pytestmark = pytest.mark.integration

CASES = ("en-place-02", "zh-person-02", "en-nomatch-job-01")
"""Kevin's move from Manchester to Leeds (the issue's example), a Chinese correction, and a
message that corrects an attribute never stated."""


async def test_the_contradiction_harness_scores_both_variants_of_each_case() -> None:
    cases = [c for c in contradiction.load_corpus() if c.id in CASES]
    outcomes, extra = await contradiction.run(cases)
    assert sorted((o.case_id, o.variant) for o in outcomes) == sorted(
        (c, v) for c in CASES for v in contradiction.VARIANTS
    )
    for o in outcomes:
        assert o.distractors_kept, o
        if o.expect == "none":
            assert (o.nothing_superseded, o.still_recalled) == (True, True), o
        else:
            assert (o.now, o.as_of, o.old_superseded) == (True, True, True), o
    assert extra["ingest_s"] > 0


WORLD = (
    "Kevin coaches a youth football team in Manchester.",
    "Kevin has coached youth football for six years.",
    "Kevin's team trains on Tuesday evenings.",
    "Mira Holt works as a nurse at the city hospital.",
    "Mira Holt and Kevin are old school friends.",
    "Mira Holt keeps two cats.",
    "Kevin drives a blue van.",
    "Mira Holt sings in a choir.",
    "Kevin's brother lives in Cardiff.",
    "Mira Holt is learning Portuguese.",
)


def _letta(number: int, question: str, new: str, old: int) -> LettaCase:
    return LettaCase(f"letta-{number:03d}", number, "w00", question, "", WORLD, new, "", (old,))


async def test_the_letta_harness_scores_cases_of_one_world_apart_from_each_other() -> None:
    cases = [
        _letta(
            0,
            "Where does Kevin coach football?",
            "Kevin coaches a youth football team in Leeds.",
            0,
        ),
        _letta(1, "How many cats does Mira Holt keep?", "Mira Holt keeps three cats.", 5),
    ]
    runs = await contradiction.run_sets([], cases)
    assert runs.own == []
    assert [(o.case_id, o.where) for o in runs.letta] == [
        ("letta-000", "same chat"),
        ("letta-001", "new chat"),
    ]
    for o in runs.letta:
        assert (o.now, o.as_of, o.old_superseded, o.lost) == (True, True, True, ()), o
        assert o.superseded == o.supporting  # each case ended its own fact, not the other's
        assert o.distractors == 9
    assert runs.extra["ingest_s"] > 0


def _turn(dia: str, session: int, text: str, when: datetime) -> Turn:
    return Turn(dia, "Ann", text, session, when, when.strftime("%I:%M %p on %d %B, %Y"))


async def test_the_headline_row_recalls_a_fact_from_an_earlier_session() -> None:
    t0 = datetime(2025, 3, 1, 10, 0, tzinfo=UTC)
    later = t0 + timedelta(days=7)
    conv = Conversation(
        "tiny",
        (
            _turn("D1:1", 1, "I adopted a greyhound called Pepper last spring.", t0),
            _turn("D1:2", 1, "Work has been busy with the quarterly reports.", t0),
            _turn("D2:1", 2, "We went hiking near the lake on Sunday.", later),
        ),
        (Question("What is the name of Ann's greyhound?", 4, ("D1:1",)),),
    )
    system = await recall_quality.run_stack([conv], recall_quality.SETUPS[0])
    assert system.settings == {}
    assert len(system.rankings) == 1
    assert system.rankings[0][0] == "D1:1"
    assert "D1:1" in system.budgeted[0]
    assert len(system.latencies_ms) == 1
