"""An install from before claims: its people's messages are stored whole, posted and recalled
as they are, a correction superseding whole messages. At the next start the ledger cuts each
message into claims once: the claims take the message's state and validity, a correction's
claims the lineage of what it replaced, the postings move from the messages to the claims, and
recall reads the claims."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from tavern_ledger.domain.ids import content_hash, evidence_id, js_json, session_source_ref
from tavern_ledger.domain.records import EvidenceRow
from tavern_ledger.domain.text import estimate_tokens
from tavern_ledger.evidence import claimcut
from tavern_ledger.evidence import rows as evidence_store
from tests.integration.ledger.conftest import LedgerBus
from tests.unit.ledger.builders import at, session_created

pytestmark = pytest.mark.integration


def _old_row(seq: int, text: str, source_class: str = "user_input") -> EvidenceRow:
    """A person's message as ingestion stored it before claims (no `metadata.claim`)."""
    ref = session_source_ref("s1", seq)
    digest = content_hash(text)
    return EvidenceRow(
        id=evidence_id(ref, digest),
        scope_id="chat-old",
        session_id="s1",
        source_class=source_class,
        authority="user_correction" if source_class == "user_correction" else "user_explicit",
        claim_domain="user_fact",
        content=text,
        content_hash=digest,
        observed_at=at(seq),
        source_ref=js_json(ref),
        source_event_id=f"event-{seq}",
        source_label="user",
        ingest="session-event",
        tokens=estimate_tokens(text),
    )


async def test_messages_stored_before_claims_are_cut_once_with_their_state_and_lineage(
    ledger: LedgerBus,
) -> None:
    last = await ledger.publish(session_created("s1", chat_id="chat-old"))
    await ledger.ingested_through(last)
    said = _old_row(2, "Hi! My sister's name is Lena and she lives in Porto.")
    correction = _old_row(3, "Correction: my sister lives in Lisbon now.", "user_correction")
    old = replace(said, state="superseded", valid_until=at(3))
    fixed = replace(correction, supersedes=(said.id,), valid_from=at(3))
    async with ledger.db.transaction():
        await evidence_store.insert(ledger.db, [old, fixed])  # posted as the old ledger did
        await ledger.db.execute("UPDATE ledger.lexicon SET segments_version = 0")

    assert await claimcut.cut_stored_messages(ledger.db) == 2
    assert await claimcut.cut_stored_messages(ledger.db) is None  # once

    messages = {r["id"]: r for r in await ledger.evidence(session_id="s1")}
    assert {r["claim_kind"] for r in messages.values()} == {"message"}
    claims = {r["content"]: r for r in await ledger.evidence(claims=True, session_id="s1")}
    assert {text: (r["claim_kind"], r["state"]) for text, r in claims.items()} == {
        "Hi!": ("chatter", "superseded"),
        "My sister's name is Lena": ("fact", "superseded"),
        "My sister lives in Porto.": ("fact", "superseded"),
        "my sister lives in Lisbon now.": ("correction", "active"),
    }
    assert claims["My sister lives in Porto."]["valid_until"] == at(3)
    assert claims["My sister lives in Porto."]["claim_of"] == said.id
    ended = sorted(claims["my sister lives in Lisbon now."]["supersedes"])
    assert ended == sorted(
        claims[t]["id"] for t in ("My sister's name is Lena", "My sister lives in Porto.")
    )

    posted = await ledger.db.fetch("SELECT DISTINCT evidence_id FROM ledger.evidence_term")
    posted_ids = {r["evidence_id"] for r in posted}
    assert not posted_ids & set(messages)  # the messages are no longer read by recall
    assert claims["my sister lives in Lisbon now."]["id"] in posted_ids
    assert claims["Hi!"]["id"] not in posted_ids  # small talk is never posted

    now = await ledger.rpc("recall", session_id="s1", query="where does my sister live?")
    assert "Lisbon" in now["text"]
    assert "Porto" not in now["text"]
    before = await ledger.rpc(
        "recall",
        session_id="s1",
        query="where does my sister live?",
        as_of=(at(3) - timedelta(seconds=1)).isoformat(),
    )
    assert "My sister lives in Porto" in before["text"]
