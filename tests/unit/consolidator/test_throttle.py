"""When a scope distils: thresholds, the daily cap, the pause after failures, the watermark."""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from tavern_consolidator.domain.throttle import (
    Position,
    ScopeState,
    Thresholds,
    capped,
    digestible,
    due,
    paused,
    retry_at,
    verdict,
    watermark_after,
)
from tests.unit.consolidator.builders import T0, evidence

T = Thresholds()


def test_ten_undigested_evidence_or_five_turns_trigger() -> None:
    assert due(9, 4, T) is None
    assert due(10, 0, T) == "evidence"
    assert due(0, 5, T) == "turns"


def test_the_daily_cap_counts_only_today() -> None:
    today = date(2026, 5, 2)
    spent = ScopeState("c1", run_day=today, run_count=24)
    assert capped(spent, today, T)
    assert not capped(spent, today + timedelta(days=1), T)
    assert not capped(ScopeState("c1", run_day=today, run_count=23), today, T)


def test_a_failed_scope_waits_longer_after_each_failure_up_to_the_cap() -> None:
    delays = [(retry_at(n, T0, 60, 3600) - T0).total_seconds() for n in (1, 2, 3, 10)]
    assert delays == [60, 120, 240, 3600]
    assert paused(ScopeState("c1", retry_at=T0 + timedelta(seconds=1)), T0)
    assert not paused(ScopeState("c1", retry_at=T0), T0)


def test_the_watermark_is_the_batch_latest_observed_time_never_now() -> None:
    rows = [evidence(3), evidence(1), evidence(2, at=evidence(3).observed_at)]
    assert watermark_after(rows) == (evidence(3).observed_at, evidence(3).id)


def test_tool_output_agent_experience_and_acknowledgements_are_not_digested() -> None:
    assert digestible("user_explicit", "user_fact", "I use vim")
    assert not digestible("external_information", "external_fact", "Paris has 2M people")
    assert not digestible("agent_inference", "experience", "retried the build")
    assert digestible("agent_inference", "work", "the repo uses uv")
    assert not digestible("user_explicit", "user_fact", "继续吧")
    assert digestible("user_correction", "user_preference", "好")  # only user input is ack-checked


def test_an_evidence_is_digested_pending_or_skipped_with_a_reason() -> None:
    e, later = evidence(2), evidence(3)

    def at(watermark: tuple[Any, str], state: str = "active", ok: bool = True) -> Position:
        return Position(e.id, state, ok, e.observed_at, *watermark)

    behind = (later.observed_at, later.id)
    assert verdict(at(behind), digested=True) == "digested"
    assert verdict(at((None, "")), digested=False) == "pending"
    # A copy that arrived after a batch with an older time than the batch's latest is still
    # pending: what a batch took is marked on the copy, not read from the watermark.
    assert verdict(at(behind), digested=False) == "pending"
    marked = Position(e.id, "active", True, e.observed_at, *behind, digested=True)
    assert verdict(marked, digested=False) == "digested"
    assert verdict(at((None, ""), ok=False), digested=False).startswith("skipped: not digestible")
    assert verdict(at((None, ""), "redacted"), digested=False) == "skipped: evidence is redacted"
