"""The Letta rows of the contradiction bench, their pure parts: each case's plan keeps it apart
from the others and puts each message where it belongs, and the scoring reads what recall injected
and what each message's rows became, whether a message left one evidence row or several claims
sharing its source event. Small cases written here, never the Letta data."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.contradiction import Chosen, Item, choose, parse_args, phase, states_by_source
from bench.contradiction_letta import (
    CORRECTION,
    LettaOutcome,
    LettaPlan,
    explain,
    failed,
    outcome,
    plan,
    rows,
    table,
)
from bench.letta_cases import LettaCase

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
FACTS = (
    "Ada Brenn teaches chemistry.",
    "Ada Brenn plays the cello.",
    "Tomas Vell developed the weather app.",
    "Tomas Vell runs marathons.",
)
APP = LettaCase(
    id="letta-000",
    number=0,
    world="w00",
    question="Who developed the weather app?",
    answer="Tomas Vell",
    facts=FACTS,
    contradicting_fact="Ada Brenn developed the weather app, not Tomas Vell.",
    contradicting_answer="Ada Brenn",
    supporting=(2,),
)
TWO = dataclasses.replace(APP, id="letta-001", number=1, supporting=(1, 2))


# --- plans --------------------------------------------------------------------------------------


@pytest.mark.parametrize(("number", "where", "chats"), [(0, "same chat", 2), (7, "new chat", 3)])
def test_facts_go_in_session_one_and_the_correction_in_a_later_session_asked_from_a_new_chat(
    number: int, where: str, chats: int
) -> None:
    p = plan(dataclasses.replace(APP, number=number), T0)
    first, later, asking = p.sessions
    assert p.where == where
    assert len({s.chat_id for s in p.sessions}) == chats
    assert (later.chat_id == first.chat_id) == (where == "same chat")
    assert len({s.character_id for s in p.sessions}) == 1
    assert p.ask_session == asking.session_id
    assert [s.text for s in p.said] == [*FACTS, "Correction: " + APP.contradicting_fact]
    assert p.refs == (0, 1, 2, 3, CORRECTION)
    assert {s.session_id for s in p.said[:-1]} == {first.session_id}
    assert p.said[-1].session_id == later.session_id
    times = [s.when for s in p.said]
    assert times == sorted(times)
    assert first.created < times[0]
    assert times[3] < p.as_of < later.created <= times[-1]
    assert times[-1] < asking.created


def test_cases_of_the_same_world_get_their_own_chats_and_character() -> None:
    plans = [plan(dataclasses.replace(APP, id=f"letta-{i:03d}", number=i), T0) for i in range(6)]
    characters = {p.sessions[0].character_id for p in plans}
    sessions = [s.session_id for p in plans for s in p.sessions]
    chats = {s.chat_id: p.case.id for p in plans for s in p.sessions}
    assert len(characters) == len(plans)
    assert len(set(sessions)) == len(sessions)
    assert len(set(chats.values())) == len(plans)
    assert all(len(s) <= 64 for s in sessions)


# --- scoring ------------------------------------------------------------------------------------

REFS = {"e0": 0, "e1": 1, "e2": 2, "e3": 3, "eC": CORRECTION}
ONE_ROW = {"e0": ["active"], "e1": ["active"], "e2": ["superseded"], "e3": ["active"]}
ONE_ROW |= {"eC": ["active"]}


def _items(*sources: str | None) -> list[Item]:
    return [Item(f"ev-{s}-{n}", s, "") for n, s in enumerate(sources)]


def _outcome(
    p: LettaPlan, states: dict[str, list[str]], now: list[Item], as_of: list[Item]
) -> LettaOutcome:
    return outcome(p, REFS, states, now, as_of)


def test_a_correction_that_took_scores_everywhere() -> None:
    o = _outcome(plan(APP, T0), ONE_ROW, _items("eC", "e3"), _items("e2", "e3"))
    assert (o.now, o.as_of, o.old_superseded, o.lost) == (True, True, True, ())
    assert o.distractors == 3
    assert o.superseded == (2,)
    assert (o.now_refs, o.as_of_refs) == (("C", "f3"), ("f2", "f3"))
    assert failed(o) == []


def test_the_old_fact_still_injected_fails_now_and_the_correction_in_the_past_fails_as_of() -> None:
    states = {**ONE_ROW, "e2": ["active"]}
    o = _outcome(plan(APP, T0), states, _items("eC", "e2"), _items("e2", "eC"))
    assert (o.now, o.as_of, o.old_superseded) == (False, False, False)
    assert failed(o) == ["now", "as_of", "old_superseded"]


def test_now_needs_the_correction_injected() -> None:
    o = _outcome(plan(APP, T0), ONE_ROW, _items("e3", None), _items("e2"))
    assert o.now is False
    assert o.now_refs == ("f3", "other")


def test_as_of_needs_every_replaced_fact() -> None:
    p = plan(TWO, T0)
    states = {**ONE_ROW, "e1": ["superseded"]}
    assert _outcome(p, states, _items("eC"), _items("e1")).as_of is False
    assert _outcome(p, states, _items("eC"), _items("e2", "e1")).as_of is True
    assert _outcome(p, states, _items("eC", "e1"), _items("e1", "e2")).now is False


def test_a_distractor_superseded_instead_is_lost_and_named() -> None:
    states = {**ONE_ROW, "e2": ["active"], "e3": ["superseded"]}
    odd = plan(dataclasses.replace(APP, number=1), T0)
    o = _outcome(odd, states, _items("eC", "e2"), _items("e2"))
    assert o.lost == (3,)
    assert o.superseded == (3,)
    assert o.old_superseded is False
    line = explain(o, APP)
    assert line.startswith("letta-000 w00 (new chat) failed now,old_superseded,distractors_kept:")
    assert "replaces f2, superseded f3, lost f3" in line
    assert "now [C f2] as-of [f2]" in line
    assert line.endswith("| Correction: Ada Brenn developed the weather app, not Tomas Vell.")


def test_a_fact_that_left_no_row_is_neither_kept_nor_superseded() -> None:
    states = {k: v for k, v in ONE_ROW.items() if k not in ("e0", "e2")}
    o = _outcome(plan(APP, T0), states, _items("eC"), _items("e2"))
    assert o.lost == (0,)
    assert o.old_superseded is False


def test_claims_sharing_a_source_event_count_as_their_message() -> None:
    claims = {
        "e0": ["active", "active"],
        "e1": ["active"],
        "e2": ["superseded", "superseded"],
        "e3": ["active", "active", "active"],
        "eC": ["active", "active"],
    }
    now = _items("eC", "eC", "e3")
    o = _outcome(plan(APP, T0), claims, now, _items("e2", "e2"))
    assert (o.now, o.as_of, o.old_superseded, o.lost) == (True, True, True, ())


def test_one_claim_left_active_is_not_superseded_and_one_claim_gone_is_not_kept() -> None:
    claims = {**ONE_ROW, "e2": ["superseded", "active"], "e0": ["active", "superseded"]}
    now = _items("eC", "e2")  # the claim still active is injected: the old fact is not out
    o = _outcome(plan(APP, T0), claims, now, _items("e2"))
    assert (o.now, o.old_superseded) == (False, False)
    assert o.lost == (0,)
    assert o.superseded == (0, 2)


def test_states_are_grouped_by_source_event_over_every_row() -> None:
    found: dict[str, dict[str, str | None]] = {
        "r1": {"source_event_id": "e2", "state": "superseded"},
        "r2": {"source_event_id": "e2", "state": "active"},
        "r3": {"source_event_id": "e0", "state": "active"},
        "r4": {"source_event_id": "elsewhere", "state": "active"},
        "r5": {"source_event_id": None, "state": "active"},
    }
    assert states_by_source(found, REFS) == {"e2": ["superseded", "active"], "e0": ["active"]}


def _scored(case: LettaCase, index: int, now: bool, lost: tuple[int, ...]) -> LettaOutcome:
    p = plan(dataclasses.replace(case, number=index), T0)
    o = _outcome(p, ONE_ROW, _items("eC") if now else _items("e2"), _items("e1", "e2"))
    return dataclasses.replace(o, lost=lost)


def test_rows_count_cases_per_where_and_distractors_per_fact() -> None:
    outcomes = [_scored(APP, 0, True, ()), _scored(APP, 1, False, (0,)), _scored(TWO, 2, True, ())]
    found = {(r.check, r.where): r for r in rows(outcomes)}
    assert (found["now", "all"].n, found["now", "all"].share) == (3, 66.7)
    assert (found["now", "same chat"].n, found["now", "same chat"].share) == (2, 100.0)
    assert found["now", "new chat"].share == 0.0
    assert (found["distractors_kept", "all"].n, found["distractors_kept", "all"].share) == (8, 87.5)
    assert found["distractors_kept", "same chat"].share == 100.0
    text = table(rows(outcomes))
    assert "≥95% MISSED" in text  # now: 66.7%
    assert "≥95% met" in text  # as-of: 100%
    assert "≥98% MISSED" in text  # distractors kept: 87.5%


# --- picking cases ------------------------------------------------------------------------------


def _letta_file(tmp_path: Path, count: int) -> Path:
    extra = {
        "facts": list(FACTS),
        "contradicting_fact": APP.contradicting_fact,
        "contradicting_answer": "",
        "supporting_fact_indices": [2],
    }
    line = json.dumps({"input": APP.question, "ground_truth": "", "agent_args": {"extra": extra}})
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join([line] * count), encoding="utf-8")
    return path


def _chosen(tmp_path: Path, *argv: str) -> Chosen | str:
    return choose(parse_args(["--letta", str(_letta_file(tmp_path, 5)), *argv]))


def test_both_sets_run_by_default_and_limit_cuts_each(tmp_path: Path) -> None:
    found = _chosen(tmp_path, "--limit", "3")
    assert isinstance(found, Chosen)
    assert [c.id for c in found.letta] == ["letta-000", "letta-001", "letta-002"]
    assert len(found.own) == 3 * 4  # three per language and expectation
    whole = _chosen(tmp_path)
    assert isinstance(whole, Chosen)
    assert len(whole.letta) == 5


@pytest.mark.parametrize(("dataset", "letta", "own"), [("letta", 5, 0), ("own", 0, 248)])
def test_dataset_picks_one_set(tmp_path: Path, dataset: str, letta: int, own: int) -> None:
    found = _chosen(tmp_path, "--dataset", dataset)
    assert isinstance(found, Chosen)
    assert (len(found.letta), len(found.own)) == (letta, own)


def test_case_picks_from_either_set_and_names_an_unknown_one(tmp_path: Path) -> None:
    found = _chosen(tmp_path, "--case", "letta-003", "--case", "en-place-02")
    assert isinstance(found, Chosen)
    assert [c.id for c in found.letta] == ["letta-003"]
    assert [c.id for c in found.own] == ["en-place-02"]
    assert _chosen(tmp_path, "--case", "letta-099") == "no such case: letta-099"


@pytest.mark.parametrize("number", [0, 1])
def test_the_facts_are_told_first_and_the_correction_with_every_later_session_after(
    number: int,
) -> None:
    p = plan(dataclasses.replace(APP, number=number), T0)
    first, later, asking = p.sessions
    sessions, said = phase(p.sessions, p.said, p.as_of, early=True)
    assert (sessions, said) == ([first], list(p.said[:-1]))
    sessions, said = phase(p.sessions, p.said, p.as_of, early=False)
    assert (sessions, said) == ([first, later, asking], [p.said[-1]])
