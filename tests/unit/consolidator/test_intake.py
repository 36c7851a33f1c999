"""LEDGER facts and session events -> the consolidator's copies (pure mapping)."""

from __future__ import annotations

from datetime import timedelta

from tavern_consolidator.domain.intake import Changes, add_event, add_fact
from tavern_events.ids import new_id
from tavern_events.ledger import (
    EvidenceAppended,
    EvidenceAppendedPayload,
    EvidenceOrigin,
    EvidenceStateChanged,
    EvidenceStateChangedPayload,
    ObservationUpserted,
    ObservationUpsertedPayload,
)
from tavern_events.turn import TurnEnded, TurnEndedPayload
from tests.unit.consolidator.builders import T0
from tests.unit.ledger.builders import session_created


def appended(text: str, authority: str = "user_explicit") -> EvidenceAppended:
    return EvidenceAppended(
        id="ev_1",
        scope_id="c1",
        ts=T0,
        payload=EvidenceAppendedPayload(
            evidence_id="ev_1",
            content_hash="0" * 64,
            text=text,
            authority=authority,
            claim_domain="user_fact",
            state="active",
            ingest="session-event",
            origin=EvidenceOrigin(session_id="s1", seq=4, event_id="e4"),
        ),
    )


def test_evidence_facts_become_copies_with_their_origin_and_digestibility() -> None:
    changes = Changes()
    add_fact(changes, appended("I use vim"))
    add_fact(changes, appended("继续吧"))
    [(first, ok), (_, ack_ok)] = changes.evidence
    assert (first.session_id, first.seq, first.event_id, first.observed_at) == ("s1", 4, "e4", T0)
    assert ok
    assert not ack_ok
    assert changes.human_scopes == {"c1"}
    assert changes.evidence_scopes == {"c1"}


def test_a_copy_is_timed_when_the_evidence_was_said_not_when_it_was_stored() -> None:
    said = T0 - timedelta(days=10)
    fact = appended("I use vim")
    fact = fact.model_copy(
        update={"payload": fact.payload.model_copy(update={"observed_at": said})}
    )
    changes = Changes()
    add_fact(changes, fact)
    [(copy, _)] = changes.evidence
    assert copy.observed_at == said  # the fact's own `ts` (T0) is when the ledger stored it


def test_observation_facts_carry_their_lineage() -> None:
    changes = Changes()
    payload = ObservationUpsertedPayload(
        observation_id="obs_2", subject="tea", predicate="likes", text="likes tea",
        claim_domain="user_preference", authority="user_explicit", evidence_ids=("ev_1",),
        supersedes="obs_1", revision="obs_2",
    )  # fmt: skip
    add_fact(changes, ObservationUpserted(id="obs_2", scope_id="c1", ts=T0, payload=payload))
    [obs] = changes.observations
    assert (obs.supersedes, obs.state, obs.evidence_ids) == ("obs_1", "active", ("ev_1",))


def test_session_events_give_scopes_and_ended_turns() -> None:
    changes = Changes()
    add_event(changes, session_created("s1", chat_id="c1"))
    ended = TurnEnded(
        id=new_id(), session_id="s1", seq=9, ts=T0, turn=3,
        payload=TurnEndedPayload(outcome="completed", steps=1),
    )  # fmt: skip
    add_event(changes, ended)
    assert changes.sessions == {"s1": "c1"}
    assert [(t.session_id, t.turn) for t in changes.turns] == [("s1", 3)]


def test_a_claims_kind_message_and_speaker_are_copied_and_what_ingestion_used_is_noted() -> None:
    fact = appended("My sister lives in Lisbon")
    claim = fact.payload.model_copy(
        update={"claim_kind": "fact", "claim_of": "ev_m", "source_label": "user:vesna"}
    )
    changes = Changes()
    add_fact(changes, fact.model_copy(update={"payload": claim}))
    ended = EvidenceStateChangedPayload(
        evidence_id="ev_0",
        from_state="active",
        to_state="superseded",
        reason="",
        replaced_by="ev_1",
    )
    add_fact(changes, EvidenceStateChanged(id="ev_0-a1", scope_id="c1", ts=T0, payload=ended))
    [(copy, _)] = changes.evidence
    assert (copy.claim_kind, copy.claim_of, copy.speaker) == ("fact", "ev_m", "user:vesna")
    assert changes.replacing == {"ev_1"}
