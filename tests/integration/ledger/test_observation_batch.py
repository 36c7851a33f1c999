"""`observation.propose_batch`: a distillation's observations in one request and one transaction,
each answered as `observation.propose` would answer it, one refused alone without the others."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.ledger.conftest import LedgerBus
from tests.unit.ledger.builders import session_created, user_message

pytestmark = pytest.mark.integration


async def _scope(ledger: LedgerBus) -> tuple[str, str]:
    """Session s1 with one statement of its user: its scope and the evidence id."""
    await ledger.publish(session_created("s1"))
    last = await ledger.publish(user_message("s1", 2, "I drink green tea every morning"))
    await ledger.ingested_through(last)
    (row,) = await ledger.evidence(session_id="s1")
    return str(row["scope_id"]), str(row["id"])


def _observation(subject: str, text: str, evidence_id: str, **kw: Any) -> dict[str, Any]:
    return {"subject": subject, "predicate": "is", "claim_domain": "user_fact", "text": text,
            "evidence_ids": [evidence_id], **kw}  # fmt: skip


async def test_a_batch_is_answered_in_order_as_single_proposals_are(ledger: LedgerBus) -> None:
    scope, evidence_id = await _scope(ledger)
    batch = [
        _observation("tea", "The user drinks green tea every morning", evidence_id),
        _observation("odd", "Not a known kind of claim", evidence_id, claim_domain="nonsense"),
        _observation("server", "The dev server of the user runs at localhost:8080", evidence_id),
    ]
    reply = await ledger.rpc("observation.propose_batch", scope_id=scope, observations=batch)
    tea, odd, server = reply["items"]
    assert (tea["stored"], tea["inserted"], tea["state"]) == (True, True, "active")
    assert tea["authority"] == "user_explicit"  # the evidence's, as a single proposal derives
    assert odd["error"]["code"] == "invalid"
    assert "nonsense" in odd["error"]["message"]
    assert (server["stored"], server["state"]) == (True, "quarantined")  # the release gate
    rows = await ledger.db.fetch(
        "SELECT id, state FROM ledger.observation WHERE scope_id = $1 ORDER BY subject", scope
    )
    assert [(r["id"], r["state"]) for r in rows] == [
        (server["observation_id"], "quarantined"),
        (tea["observation_id"], "active"),
    ]

    single = await ledger.rpc("observation.propose", scope_id=scope, **batch[0])
    assert (single["observation_id"], single["inserted"]) == (tea["observation_id"], False)
    again = await ledger.rpc("observation.propose_batch", scope_id=scope, observations=batch)
    assert [item.get("inserted") for item in again["items"]] == [False, None, False]
    count = await ledger.db.fetchval("SELECT count(*) FROM ledger.observation")
    assert count == 2


async def test_a_batch_is_checked_once_for_its_scope_and_whole_for_its_shape(
    ledger: LedgerBus,
) -> None:
    scope, evidence_id = await _scope(ledger)
    too_many = [_observation(f"s{n}", f"fact {n}", evidence_id) for n in range(101)]
    refused = await ledger.rpc("observation.propose_batch", scope_id=scope, observations=too_many)
    assert refused["error"]["code"] == "invalid"
    empty = await ledger.rpc("observation.propose_batch", scope_id=scope, observations=[])
    assert empty["error"]["code"] == "invalid"
    declared = [_observation("tea", "Green tea", evidence_id, authority="system_policy")]
    raised = await ledger.rpc("observation.propose_batch", scope_id=scope, observations=declared)
    assert raised["items"][0]["authority"] == "system_policy"  # the operator may declare one
    assert await ledger.db.fetchval("SELECT count(*) FROM ledger.observation") == 1
