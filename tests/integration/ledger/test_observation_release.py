"""Observations over the bus (acp.md §3.5, §9.3, §15): the release gate holds what only held
then and there, recall ages observations by half-life, the eligibility matrix (not a fixed
list) decides which authorities are injected, and an explicit authority wins."""
# ruff: noqa: RUF001 - full-width characters are test data (Chinese text)

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.integration.ledger.conftest import LedgerBus
from tests.unit.ledger.builders import session_created, tool_result, user_message

pytestmark = pytest.mark.integration


@pytest.fixture
def ledger_options() -> dict[str, Any]:
    return {"ledger_observation_injection": True}


async def _scope(ledger: LedgerBus) -> tuple[str, list[str]]:
    """Session s1 with a user's statement and a tool's output; its scope and evidence ids."""
    last = 0
    for event in (
        session_created("s1"),
        user_message("s1", 2, "I drink green tea every morning"),
        tool_result("s1", 3, "Sencha is a Japanese green tea."),
    ):
        last = await ledger.publish(event)
    await ledger.ingested_through(last)
    rows = await ledger.evidence(session_id="s1")
    return str(rows[0]["scope_id"]), [str(r["id"]) for r in rows]


async def _propose(ledger: LedgerBus, scope: str, subject: str, text: str, **kw: Any) -> Any:
    body = {"predicate": "is", "claim_domain": "user_fact", **kw}
    reply = await ledger.rpc(
        "observation.propose", scope_id=scope, subject=subject, text=text, **body
    )
    assert "error" not in reply, reply
    return reply


HELD = {
    "用户同意继续当前任务": "ephemeral",
    "The build output is kept in /tmp/build-4411/out.log": "one-shot-path",
    "The dev server of the user runs at localhost:8080": "env-bound",
    "项目目前最新的版本是 2.3.1": "stale-version",
    "终于搞定了，太爽了": "empty-emotion",
}


async def test_the_release_gate_holds_what_only_held_then_and_there(ledger: LedgerBus) -> None:
    scope, ids = await _scope(ledger)
    for n, (text, cls) in enumerate(HELD.items()):
        reply = await _propose(ledger, scope, f"held {n}", text, evidence_ids=ids[:1])
        assert (reply["state"], reply["release"]["class"]) == ("quarantined", cls), text
        assert reply["release"]["decision"] == "hard_quarantine"
    kept = await _propose(ledger, scope, "tea", "drinks green tea every morning", evidence_ids=ids)
    assert (kept["state"], kept["release"]["decision"]) == ("active", "pass")

    states = dict(
        await ledger.db.fetch(
            "SELECT text, state FROM ledger.observation WHERE scope_id = $1", scope
        )
    )
    assert {states[text] for text in HELD} == {"quarantined"}
    trail = await ledger.rpc("audit", op="observation-upsert", scope_id=scope, limit=20)
    held = [e for e in trail["items"] if e["payload"]["state"] == "quarantined"]
    assert sorted(e["payload"]["release"]["class"] for e in held) == sorted(HELD.values())
    recalled = await ledger.rpc("recall", session_id="s1", query="server build 版本 搞定 任务")
    assert not any(text in recalled["text"] for text in HELD)


async def test_observations_lose_half_their_score_every_thirty_days(ledger: LedgerBus) -> None:
    scope, ids = await _scope(ledger)
    now = datetime.now(UTC)
    for subject, days in (("day zero", 0), ("day tens", 30), ("day nine", 90)):
        await _propose(
            ledger,
            scope,
            subject,
            "keeps oolong leaves in a tin",
            evidence_ids=ids[:1],
            observed_at=(now - timedelta(days=days)).isoformat(),
        )
    recalled = await ledger.rpc("recall", session_id="s1", query="oolong tin", explain=True)
    score = {
        r["evidence_id"]: r["score"]
        for r in recalled["ranked"]
        if r["source_class"] == "observation"
    }
    rows = await ledger.db.fetch("SELECT id, subject FROM ledger.observation")
    by_subject = {r["subject"]: score[r["id"]] for r in rows}
    fresh, month, season = by_subject["day zero"], by_subject["day tens"], by_subject["day nine"]
    assert fresh > month > season > 0
    assert month <= fresh * 0.5  # half-life 30 days (and no freshness left at 30 days)
    assert season == pytest.approx(month * 0.25, rel=0.02)  # 90 days: x0.125 of day zero


async def test_a_single_observation_user_fact_is_recalled_and_a_preference_is_not(
    ledger: LedgerBus,
) -> None:
    scope, _ = await _scope(ledger)
    fact = await _propose(ledger, scope, "kettle", "owns a copper kettle for the tea")
    assert fact["authority"] == "single_observation"  # no evidence behind it
    liking = await _propose(
        ledger, scope, "kettle pref", "prefers a copper kettle", claim_domain="user_preference"
    )
    assert liking["authority"] == "single_observation"
    recalled = await ledger.rpc("recall", session_id="s1", query="copper kettle", explain=True)
    assert "owns a copper kettle" in recalled["text"]
    assert "prefers a copper kettle" not in recalled["text"]  # the matrix: no preferences


async def test_an_explicit_authority_raises_and_lowers_the_derived_one(ledger: LedgerBus) -> None:
    scope, ids = await _scope(ledger)
    tool_only = ids[1:]  # the tool's output: external_information
    raised = await _propose(
        ledger, scope, "sencha", "sencha is a green tea", evidence_ids=tool_only,
        authority="user_explicit", claim_domain="external_fact",
    )  # fmt: skip
    assert (raised["authority"], raised["derived_authority"]) == (
        "user_explicit",
        "external_information",
    )
    lowered = await _propose(
        ledger, scope, "morning", "drinks tea in the morning", evidence_ids=ids[:1],
        authority="agent_inference",
    )  # fmt: skip
    assert (lowered["authority"], lowered["derived_authority"]) == (
        "agent_inference",
        "user_explicit",
    )
    stored = dict(await ledger.db.fetch("SELECT subject, authority FROM ledger.observation"))
    assert stored == {"sencha": "user_explicit", "morning": "agent_inference"}


async def test_a_person_lists_the_held_observations_and_releases_one(ledger: LedgerBus) -> None:
    scope, ids = await _scope(ledger)
    held = await _propose(
        ledger, scope, "dev server", "runs its API at localhost:8080", evidence_ids=ids[:1]
    )
    await _propose(ledger, scope, "tea", "drinks green tea every morning", evidence_ids=ids[:1])
    queue = await ledger.rpc("observation.list", scope_id=scope)
    assert [(o["observation_id"], o["flags"]) for o in queue["items"]] == [
        (held["observation_id"], ["release:env-bound"])
    ]
    released = await ledger.rpc(
        "observation.release", observation_id=held["observation_id"], reason="it is the shared one"
    )
    assert (released["from_state"], released["to_state"]) == ("quarantined", "active")
    assert (await ledger.rpc("observation.list", scope_id=scope))["items"] == []
    again = await ledger.rpc("observation.release", observation_id=held["observation_id"])
    assert again["error"]["reason"] == "invalid_state"
    missing = await ledger.rpc("observation.release", observation_id="obs_missing")
    assert missing["error"]["code"] == "not_found"
    trail = await ledger.rpc("audit", op="observation-release", scope_id=scope)
    assert [e["reason"] for e in trail["items"]] == ["it is the shared one"]
    recalled = await ledger.rpc("recall", session_id="s1", query="API localhost server")
    assert "localhost:8080" in recalled["text"]
