"""Expression policy: floors that configuration can only make stricter, and the decision order."""

from __future__ import annotations

from datetime import timedelta

from tavern_consolidator.domain.policy import PolicyConfig, effective, evaluate
from tests.unit.consolidator.builders import T0, evidence

ON = PolicyConfig(auto_promote=True)


def test_config_cannot_lower_the_floors_but_may_raise_them() -> None:
    lowered = effective(
        PolicyConfig(min_events=0, min_strong=0, max_age_days=365, auto_promote=True)
    )
    assert (lowered.min_events, lowered.min_strong, lowered.max_age_days) == (2, 1, 30)
    stricter = effective(PolicyConfig(min_events=5, min_strong=3, max_age_days=7))
    assert (stricter.min_events, stricter.min_strong, stricter.max_age_days) == (5, 3, 7)
    assert stricter.same_conversation
    assert not stricter.auto_promote


def test_auto_promotion_is_off_by_default() -> None:
    verdict = evaluate("proposed", [evidence(1), evidence(2)], 0, PolicyConfig(), T0)
    assert (verdict.decision, verdict.reason) == (
        "hold",
        "automatic promotion disabled (auto_promote=false)",
    )


def test_two_strong_events_of_one_conversation_promote() -> None:
    verdict = evaluate("proposed", [evidence(1), evidence(2)], 0, ON, T0)
    assert verdict.decision == "promote"
    assert verdict.snapshot["floors"]["effective"]["min_events"] == 2


def test_only_the_newest_conversation_counts() -> None:
    rows = [evidence(1, session="old"), evidence(2, session="new")]
    verdict = evaluate("proposed", rows, 0, PolicyConfig(min_events=0, auto_promote=True), T0)
    assert (verdict.decision, verdict.reason) == ("hold", "1/2 compatible events")


def test_holds_for_conflicts_expiry_and_weak_evidence_and_rejects_decided_ones() -> None:
    two = [evidence(1), evidence(2)]
    assert evaluate("proposed", two, 1, ON, T0).reason.startswith("a conflicting candidate")
    later = T0 + timedelta(days=31)
    assert evaluate("proposed", two, 0, ON, later).reason.startswith(
        "all compatible evidence expired"
    )
    weak = [
        evidence(1, authority="single_observation"),
        evidence(2, authority="single_observation"),
    ]
    assert evaluate("proposed", weak, 0, ON, T0).reason == "0/1 strong events (2 supporting)"
    assert evaluate("promoted", two, 0, ON, T0).decision == "reject"
