"""The profile: weights from support, recurrence and approval; traceable to session events."""

from __future__ import annotations

from tavern_consolidator.domain.dreaming import dream
from tavern_consolidator.domain.profile import Support, as_json, build, support_of, weight
from tests.unit.consolidator.builders import T0, evidence, observation


def test_the_weight_formula_of_acp() -> None:
    assert weight(1, 1, False) == 0.6
    assert weight(3, 2, False) == 0.84
    assert weight(5, 4, True) == 0.95  # clamped
    assert weight(0, 0, True) == 0.72


def test_facts_and_preferences_only_each_traced_to_its_session_event() -> None:
    e = evidence(7, session="s9")
    rows = [
        observation(1, "likes tea", domain="user_preference", evidence_ids=(e.id,)),
        observation(2, "lives in Lyon", domain="user_fact"),
        observation(3, "uses uv", domain="work"),
    ]
    profile = build(
        "c1", rows, {e.id: e}, {rows[0].id: Support(days=2, sessions=2, confirmed=True)}
    )
    data = as_json(profile)
    [pref] = data["preferences"]
    assert pref["weight"] == 0.8
    assert pref["signals"]["confirmed"] is True
    assert pref["trace"] == [
        {"evidence_id": e.id, "origin": {"session_id": "s9", "seq": 7, "event_id": "e7"}}
    ]
    assert [f["text"] for f in data["stableFacts"]] == ["lives in Lyon"]
    assert data["recentState"] == []
    assert data["source_version"] == 2
    assert {c["confidence"] for c in data["candidates"]} == {0.8, 0.6}


def test_support_comes_from_the_pool_and_approval_confirms() -> None:
    plan = dream("c1", [observation(1), observation(2)], [], T0)
    [entry] = plan.entries
    approved = entry.__class__(**{**entry.__dict__, "state": "approved"})
    found = support_of([approved])
    assert found[observation(1).id] == Support(days=1, sessions=0, confirmed=True)
