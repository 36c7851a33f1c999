"""The contradiction bench's pure parts: the corpus is fit to score, the plans keep cases apart
and put each message where its variant says, and the scoring reads what was injected."""

from __future__ import annotations

import dataclasses
from collections import Counter
from datetime import UTC, datetime

import pytest

from bench.contradiction import (
    CATEGORIES,
    FORMS,
    LANGS,
    VARIANTS,
    Case,
    Item,
    Outcome,
    Role,
    by_category,
    classify,
    load_corpus,
    outcome,
    phase,
    pick,
    plan,
    problems,
    rows,
    shows_only,
    table,
)

CORPUS = load_corpus()
T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
KEVIN = Case(
    id="en-place-x",
    lang="en",
    category="place",
    subject="Kevin",
    form="correction",
    fact="Kevin coaches a youth football team in Manchester.",
    correction="Correction: Kevin now coaches in Leeds.",
    question="Where does Kevin coach football?",
    distractors=("Kevin has coached youth football for six years.", "Kevin's team trains late."),
    old_marker="Manchester",
    new_marker="Leeds",
    expect="supersede",
)


# --- the corpus ---------------------------------------------------------------------------------


def test_the_corpus_is_fit_to_score() -> None:
    assert problems(CORPUS) == []


def test_the_corpus_is_large_enough_and_covers_both_languages_and_every_category() -> None:
    corrections = [c for c in CORPUS if c.expect == "supersede"]
    assert len(corrections) >= 200
    per_lang = Counter(c.lang for c in corrections)
    assert set(per_lang) == set(LANGS)
    assert min(per_lang.values()) >= 0.4 * len(corrections)  # roughly half each
    for lang in LANGS:
        assert {c.category for c in corrections if c.lang == lang} == set(CATEGORIES)


def test_every_form_of_correction_is_there_more_than_once() -> None:
    forms = Counter(c.form for c in CORPUS if c.expect == "supersede")
    assert set(forms) == set(FORMS)
    assert min(forms.values()) >= 5


def test_there_are_no_match_cases_in_both_languages() -> None:
    none = Counter(c.lang for c in CORPUS if c.expect == "none")
    assert sum(none.values()) >= 20
    assert set(none) == set(LANGS)


def test_cases_are_about_the_user_and_about_named_people_and_some_leave_the_name_out() -> None:
    subjects = Counter(c.subject for c in CORPUS)
    assert subjects["self"] >= 30
    assert subjects["我"] >= 30
    assert len(subjects) >= 30
    assert sum(1 for c in CORPUS if not c.subject_in_correction) >= 4


def test_no_two_cases_say_the_same() -> None:
    assert len({c.fact for c in CORPUS}) == len(CORPUS)
    assert len({c.correction for c in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize(
    ("change", "complaint"),
    [
        ({"form": "moved"}, "not of form moved"),
        ({"form": "zh_correction", "correction": "更正：Kevin now coaches in Leeds."}, "in en"),  # noqa: RUF001
        ({"new_marker": "Bristol"}, "new marker not in the correction"),
        ({"distractors": ("Kevin loves Leeds.", "Kevin's team trains late.")}, "in a distractor"),
        ({"distractors": ("Kevin's team trains late.",)}, "1 distractors"),
        ({"old_marker": "youth", "expect": "none"}, "in a distractor"),
        ({"lang": "fr"}, "unknown lang"),
    ],
)
def test_unfit_cases_are_named(change: dict[str, object], complaint: str) -> None:
    found = problems([dataclasses.replace(KEVIN, **change)])  # type: ignore[arg-type]
    assert any(complaint in line for line in found), found


def test_a_repeated_case_is_named() -> None:
    found = problems([KEVIN, dataclasses.replace(KEVIN, id="en-place-y")])
    assert found == ["en-place-y: the same fact and correction as another case"]


def test_pick_takes_the_first_of_each_language_and_expectation() -> None:
    picked = pick(CORPUS, 2)
    assert Counter((c.lang, c.expect) for c in picked) == {
        ("en", "supersede"): 2,
        ("zh", "supersede"): 2,
        ("en", "none"): 2,
        ("zh", "none"): 2,
    }
    assert pick(CORPUS, 0) == CORPUS


# --- plans --------------------------------------------------------------------------------------


def test_same_session_tells_everything_in_one_session_and_asks_there() -> None:
    p = plan(KEVIN, 0, "same-session", T0)
    assert [s.session_id for s in p.sessions] == [p.ask_session]
    assert [s.role for s in p.said] == ["distractor", "distractor", "fact", "correction"]
    assert {s.session_id for s in p.said} == {p.ask_session}
    fact, correction = p.said[2], p.said[3]
    assert fact.when < p.as_of < correction.when


@pytest.mark.parametrize(("index", "chat"), [(0, "a"), (1, "b")])
def test_cross_session_corrects_in_a_later_session_and_asks_from_a_new_chat(
    index: int, chat: str
) -> None:
    p = plan(KEVIN, index, "cross-session", T0)
    first, later, asking = p.sessions
    assert len({s.chat_id for s in p.sessions}) == (2 if chat == "a" else 3)
    assert later.chat_id.endswith(f"-{chat}")
    assert asking.chat_id not in {first.chat_id, later.chat_id}
    assert len({s.character_id for s in p.sessions}) == 1
    assert p.ask_session == asking.session_id
    where = {s.role: s.session_id for s in p.said}
    assert where["fact"] == where["distractor"] == first.session_id
    assert where["correction"] == later.session_id
    assert first.created <= p.said[0].when
    assert later.created <= p.said[-1].when < asking.created


def test_every_plan_has_its_own_chats_and_character() -> None:
    plans = [plan(c, i, v, T0) for v in VARIANTS for i, c in enumerate(CORPUS)]
    chats = [s.chat_id for p in plans for s in p.sessions]
    sessions = [s.session_id for p in plans for s in p.sessions]
    characters = {p.sessions[0].character_id for p in plans}
    assert len(set(sessions)) == len(sessions)
    assert len(characters) == len(plans)
    owners = {s.chat_id: (p.case.id, p.variant) for p in plans for s in p.sessions}
    assert len(set(owners.values())) == len(plans)
    assert len(set(chats)) == len(owners)
    assert all(len(s) <= 64 for s in sessions)


# --- scoring ------------------------------------------------------------------------------------

ROLES: dict[str, Role] = {
    "e-fact": "fact",
    "e-new": "correction",
    "e-d1": "distractor",
    "e-d2": "distractor",
}


def _item(source: str | None, text: str = "") -> Item:
    return Item(f"ev-{source}", source, text)


def test_items_are_read_by_source_event_first_then_by_markers() -> None:
    assert classify(_item("e-fact"), KEVIN, ROLES) == "old"
    assert classify(_item("e-new", "Manchester"), KEVIN, ROLES) == "new"
    assert classify(_item("e-d1"), KEVIN, ROLES) == "distractor"
    assert classify(_item(None, "Kevin coaches in Leeds now"), KEVIN, ROLES) == "new"
    assert classify(_item("obs", "Kevin: no longer Manchester, Leeds"), KEVIN, ROLES) == "new"
    assert classify(_item("obs", "Kevin coaches in manchester"), KEVIN, ROLES) == "old"
    assert classify(_item("obs", "Kevin likes tea"), KEVIN, ROLES) == "other"


def test_shows_only_needs_the_wanted_and_not_the_unwanted() -> None:
    assert shows_only(["new", "distractor"], "new", "old")
    assert not shows_only(["new", "old"], "new", "old")
    assert not shows_only(["distractor"], "new", "old")
    assert not shows_only([], "old", "new")


ACTIVE = {"e-fact": ["superseded"], "e-new": ["active"], "e-d1": ["active"], "e-d2": ["active"]}


def test_a_correction_that_took_scores_everywhere() -> None:
    p = plan(KEVIN, 0, "same-session", T0)
    now = [_item("e-new"), _item("e-d1")]
    before = [_item("e-fact"), _item("e-d2")]
    o = outcome(p, ROLES, ACTIVE, now, before)
    assert (o.now, o.as_of, o.distractors_kept, o.old_superseded) == (True, True, True, True)
    assert o.nothing_superseded is None
    assert o.still_recalled is None


def test_both_injected_fails_now_and_a_lost_distractor_fails_kept() -> None:
    p = plan(KEVIN, 0, "same-session", T0)
    states = {**ACTIVE, "e-fact": ["active"], "e-d2": ["superseded"]}
    now = [_item("e-new"), _item("e-fact")]
    before = [_item("e-fact"), _item("e-new")]  # the live session's injection leaked in
    o = outcome(p, ROLES, states, now, before)
    assert (o.now, o.as_of, o.distractors_kept, o.old_superseded) == (False, False, False, False)


def test_a_distractor_that_left_no_evidence_is_not_kept() -> None:
    p = plan(KEVIN, 0, "same-session", T0)
    states = {k: v for k, v in ACTIVE.items() if k != "e-d2"}
    o = outcome(p, ROLES, states, [], [])
    assert o.distractors_kept is False


def test_no_match_cases_score_what_was_superseded_and_whether_the_fact_is_still_there() -> None:
    p = plan(dataclasses.replace(KEVIN, expect="none"), 0, "cross-session", T0)
    quiet = {"e-fact": ["active"], "e-new": ["active"], "e-d1": ["active"], "e-d2": ["active"]}
    o = outcome(p, ROLES, quiet, [_item("e-fact")], [])
    assert (o.now, o.as_of, o.nothing_superseded, o.still_recalled) == (None, None, True, True)
    o = outcome(p, ROLES, ACTIVE, [_item("e-new")], [])
    assert (o.nothing_superseded, o.still_recalled) == (False, False)


def _outcome(case_id: str, lang: str, variant: str, now: bool | None) -> Outcome:
    return Outcome(case_id, lang, variant, "supersede", now, True, True, now, None, None)


def test_rows_count_only_the_cases_a_check_applies_to() -> None:
    found = rows(
        [
            _outcome("a", "en", "same-session", True),
            _outcome("b", "en", "same-session", False),
            _outcome("c", "zh", "cross-session", True),
        ]
    )
    now = {(r.lang, r.variant): r for r in found if r.check == "now"}
    assert now[("en", "same-session")].n == 2
    assert now[("en", "same-session")].share == 50.0
    assert now[("en", "same-session")].failed == ("b",)
    assert now[("zh", "cross-session")].share == 100.0
    assert ("zh", "same-session") not in now
    assert not [r for r in found if r.check == "nothing_superseded"]
    text = table(found)
    assert "≥95% MISSED" in text
    assert "≥95% met" in text


def test_by_category_counts_cases_with_a_now_check() -> None:
    cases = [KEVIN, dataclasses.replace(KEVIN, id="x2", category="job")]
    outcomes = [
        _outcome("en-place-x", "en", "same-session", True),
        _outcome("en-place-x", "en", "cross-session", False),
        _outcome("x2", "en", "same-session", True),
    ]
    assert by_category(outcomes, cases) == {
        "place": {"now": 50.0, "as_of": 100.0, "n": 2},
        "job": {"now": 100.0, "as_of": 100.0, "n": 1},
    }


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_correction_is_told_after_the_rest_in_both_variants(variant: str) -> None:
    p = plan(KEVIN, 1, variant, T0)
    sessions, said = phase(p.sessions, p.said, p.as_of, early=True)
    assert [m.role for m in said] == ["distractor", "distractor", "fact"]
    assert sessions == [p.sessions[0]]
    sessions, said = phase(p.sessions, p.said, p.as_of, early=False)
    assert [m.role for m in said] == ["correction"]
    assert sessions == list(p.sessions)
