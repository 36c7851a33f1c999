"""Loading Letta-format contradiction cases into plain data, and the offline check that runs a
matcher over them, on small cases written here (never the Letta data)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from bench.letta_cases import (
    LettaCase,
    Match,
    explain,
    load_cases,
    match,
    parse_cases,
    problems,
    summary,
)

FACTS = [
    "Ada Brenn teaches chemistry at a high school.",
    "Ada Brenn plays the cello in a quartet.",
    "Tomas Vell developed the weather app.",
    "Tomas Vell and Ada Brenn live on the same street.",
]
OTHER_FACTS = [*FACTS[:3], "Tomas Vell runs marathons."]


def _line(question: str, new: str, indices: list[int], facts: list[str] = FACTS) -> str:
    extra = {
        "facts": facts,
        "contradicting_fact": new,
        "contradicting_answer": "an answer",
        "supporting_fact_indices": indices,
    }
    return json.dumps({"input": question, "ground_truth": "truth", "agent_args": {"extra": extra}})


LINES = [
    _line("Who developed the weather app?", "Ada Brenn developed the weather app.", [2]),
    _line("What does Ada play?", "Ada Brenn plays the violin, not the cello.", [1]),
    "",
    _line("Who runs marathons?", "Ada Brenn, not Tomas, runs marathons.", [3], OTHER_FACTS),
    _line("Where do they live?", "Ada and Tomas moved apart; Ada teaches abroad.", [0, 3]),
]


def test_cases_load_with_ids_by_line_worlds_by_facts_and_the_correction_as_said() -> None:
    cases = parse_cases(LINES)
    assert [c.id for c in cases] == ["letta-000", "letta-001", "letta-003", "letta-004"]
    assert [c.number for c in cases] == [0, 1, 3, 4]
    assert [c.world for c in cases] == ["w00", "w00", "w01", "w00"]
    first = cases[0]
    assert first.facts == tuple(FACTS)
    assert first.question == "Who developed the weather app?"
    assert first.supporting == (2,)
    assert first.correction == "Correction: Ada Brenn developed the weather app."
    assert first.distractors == (0, 1, 3)
    assert cases[3].distractors == (1, 2)


def test_cases_load_from_a_file(tmp_path: Path) -> None:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    assert load_cases(path) == parse_cases(LINES)


def test_a_missing_file_says_where_the_data_is_read_from(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="shared/data"):
        load_cases(tmp_path / "absent.jsonl")


def test_fit_cases_have_no_problems() -> None:
    assert problems(parse_cases(LINES)) == []


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"supporting": (7,)}, "outside the facts"),
        ({"supporting": ()}, "no supporting fact"),
        ({"supporting": (1, 1)}, "repeated"),
        ({"facts": ("a fact", " ")}, "an empty one"),
        ({"contradicting_fact": FACTS[0]}, "is one of the facts"),
        ({"question": ""}, "empty contradicting fact or question"),
    ],
)
def test_unfit_cases_are_named(change: dict[str, object], complaint: str) -> None:
    case = dataclasses.replace(parse_cases(LINES)[0], **change)  # type: ignore[arg-type]
    found = problems([case])
    assert any(complaint in line for line in found), found


def _by_words(correction: str, facts: Sequence[str]) -> set[int]:
    """A toy matcher: the facts sharing the correction's last word."""
    last = correction.rstrip(".").split()[-1].lower()
    return {i for i, f in enumerate(facts) if last in f.lower()}


def test_a_matcher_is_given_the_correction_as_said_and_the_facts_in_order() -> None:
    seen: list[tuple[str, tuple[str, ...]]] = []

    def spy(correction: str, facts: Sequence[str]) -> set[int]:
        seen.append((correction, tuple(facts)))
        return set()

    match(parse_cases(LINES)[:1], spy)
    assert seen == [("Correction: Ada Brenn developed the weather app.", tuple(FACTS))]


def test_matches_say_whether_the_old_fact_was_picked_and_which_distractors_were_lost() -> None:
    found = match(parse_cases(LINES), _by_words)
    assert [m.chosen for m in found] == [(2,), (1,), (3,), ()]
    app, cello, marathon, moved = found
    assert (app.old_out, app.exact, app.lost) == (True, True, ())
    assert cello.exact  # the last word, "cello", is in fact 1 only
    assert marathon.exact
    assert (moved.old_out, moved.exact, moved.lost) == (False, False, ())


def test_a_matcher_that_picks_a_distractor_loses_it_but_may_still_take_the_old_fact() -> None:
    case = parse_cases(LINES)[0]
    m = Match(case, (0, 2))
    assert (m.old_out, m.exact, m.lost) == (True, False, (0,))
    assert explain(m).startswith("letta-000 w00: replaces f2, picked f0 f2 | Correction: Ada")


def test_the_summary_counts_cases_and_distractor_facts() -> None:
    cases = parse_cases(LINES)
    found = [Match(cases[0], (2,)), Match(cases[1], (0,)), Match(cases[3], ())]
    s = summary(found)
    assert s.cases == 3
    assert s.old_out == 33.3
    assert s.exact == 33.3
    assert s.distractors_kept == 87.5  # 8 distractor facts, fact 0 of the second case lost
    assert s.nothing_picked == 1


def test_a_summary_of_nothing_is_zero() -> None:
    assert summary([]).cases == 0
    assert summary([]).distractors_kept == 0.0


def test_every_case_is_a_plain_frozen_dataclass() -> None:
    case = parse_cases(LINES)[0]
    assert isinstance(case, LettaCase)
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.question = "changed"  # type: ignore[misc]
