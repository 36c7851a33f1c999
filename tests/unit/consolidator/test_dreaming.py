"""Dreaming: clusters by subject or bigram Jaccard, recurrence, the forget list, decisions kept."""

from __future__ import annotations

from datetime import timedelta

from tavern_consolidator.domain.dreaming import (
    cluster,
    decide_state,
    dream,
    keep_decisions,
    plan_forget,
    pool_id,
)
from tests.unit.consolidator.builders import T0, evidence, observation


def test_same_subject_or_similar_text_in_the_same_domain_cluster_together() -> None:
    rows = [
        observation(1, "喜欢喝浓的红茶", subject="tea"),
        observation(2, "喜欢喝浓的红茶啊", subject="drink"),  # Jaccard >= 0.55
        observation(3, "完全无关的内容", subject="tea"),  # same subject
        observation(4, "喜欢喝浓的红茶", subject="tea", domain="work"),  # other domain
        observation(5, "每天早上跑步", subject="run"),
        observation(6, "gone", subject="tea", state="superseded"),
    ]
    found = [[m.id[-1] for m in c.members] for c in cluster(rows)]
    assert found == [["1", "2", "3"], ["4"], ["5"]]


def test_recurrence_across_sessions_or_days_makes_a_consensus() -> None:
    assert decide_state(1, 5, 5) == "candidate"
    assert decide_state(2, 2, 1) == "consensus"
    assert decide_state(2, 1, 2) == "consensus"
    assert decide_state(3, 1, 1) == "candidate"


def test_a_plan_counts_sessions_and_days_from_the_evidence() -> None:
    e1 = evidence(1, session="s1")
    e2 = evidence(2, session="s1", at=T0 + timedelta(days=1))
    rows = [
        observation(1, "likes tea", evidence_ids=(e1.id,)),
        observation(2, "drinks tea", evidence_ids=(e2.id,)),
    ]
    plan = dream("c1", rows, [e1, e2], T0 + timedelta(days=2))
    [entry] = plan.entries
    assert (entry.state, entry.sessions, entry.days, entry.occurrences) == (
        "consensus",
        ("s1",),
        2,
        2,
    )
    assert entry.text == "drinks tea"
    assert entry.subject == "tea"
    assert entry.id == pool_id("c1", "user_preference", "tea", [rows[1].id, rows[0].id])


def test_the_forget_list_only_names_stale_superseded_and_quarantined_rows() -> None:
    now = T0 + timedelta(days=100)
    rows = [
        observation(1, state="superseded"),
        observation(2),
        observation(3, state="superseded", at=now),
    ]
    ev = [evidence(1, state="quarantined"), evidence(2), evidence(3, state="quarantined", at=now)]
    plan = plan_forget(rows, ev, now, 90)
    assert plan.observations == (rows[0].id,)
    assert plan.evidence == (ev[0].id,)


def test_human_decisions_in_the_pool_are_kept() -> None:
    plan = dream("c1", [observation(1), observation(2)], [], T0)
    [entry] = plan.entries
    assert keep_decisions([entry], {entry.id: "approved"})[0].state == "approved"
    assert keep_decisions([entry], {entry.id: "consensus"})[0].state == entry.state
