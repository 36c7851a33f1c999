"""`observation.propose_batch`: a distillation's observations in one request and one transaction,
each answered as `observation.propose` would answer it, one refused alone without the others."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.ledger.conftest import LedgerBus
from tests.unit.ledger.builders import session_created, user_message

pytestmark = pytest.mark.integration


async def _scope(ledger: LedgerBus, session_id: str = "s1") -> tuple[str, str]:
    """A session with one statement of its user: its scope and the evidence id."""
    await ledger.publish(session_created(session_id))
    last = await ledger.publish(user_message(session_id, 2, "I drink green tea every morning"))
    await ledger.ingested_through(last)
    (row,) = await ledger.evidence(session_id=session_id)
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


async def test_one_key_proposed_again_in_a_batch_supersedes_in_order_as_one_by_one(
    ledger: LedgerBus,
) -> None:
    """The batch stores its rows in a fixed number of statements; what it leaves is what the
    same proposals one at a time leave: each active row supersedes the one before it (stored
    earlier or earlier in the batch), and a repeated observation changes nothing."""
    drinks = ["coffee", "green tea", "oolong", "oolong"]

    async def propose(session_id: str, batched: bool) -> tuple[list[dict[str, Any]], str]:
        scope, evidence_id = await _scope(ledger, session_id)
        first, *rest = [_observation("drink", f"The user drinks {d}", evidence_id) for d in drinks]
        items = [await ledger.rpc("observation.propose", scope_id=scope, **first)]
        if batched:
            reply = await ledger.rpc("observation.propose_batch", scope_id=scope, observations=rest)
            items += reply["items"]
        else:
            items += [await ledger.rpc("observation.propose", scope_id=scope, **o) for o in rest]
        return items, scope

    async def left(scope: str) -> list[tuple[str, str, list[str]]]:
        rows = await ledger.db.fetch(
            "SELECT id, text, state, supersedes FROM ledger.observation WHERE scope_id = $1 "
            "ORDER BY created_at, id",
            scope,
        )
        text = {r["id"]: r["text"] for r in rows}
        return [(r["text"], r["state"], [text[i] for i in r["supersedes"]]) for r in rows]

    batched, scope = await propose("s1", batched=True)
    one_by_one, other = await propose("s2", batched=False)
    shape = [(i["inserted"], i["state"], i["superseded"] is not None) for i in batched]
    assert shape == [(True, "active", False), (True, "active", True), (True, "active", True),
                     (False, "active", False)]  # fmt: skip
    assert batched[1]["superseded"] == batched[0]["observation_id"]
    assert batched[2]["superseded"] == batched[1]["observation_id"]
    assert batched[3]["observation_id"] == batched[2]["observation_id"]
    assert [(i["inserted"], i["state"], i["superseded"] is not None) for i in one_by_one] == shape
    assert (
        await left(scope)
        == await left(other)
        == [
            ("The user drinks coffee", "superseded", []),
            ("The user drinks green tea", "superseded", ["The user drinks coffee"]),
            ("The user drinks oolong", "active", ["The user drinks green tea"]),
        ]
    )
    audited = await ledger.db.fetchval(
        "SELECT count(*) FROM ledger.audit WHERE op = 'observation-upsert' AND scope_id = $1",
        scope,
    )
    assert audited == 3  # one entry for each row written, none for the repeat
