"""The checks of a model's judgement (`claim.supersede`): what a new claim may end; the facts
that let the consolidator know who said a claim and what ingestion already used."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tavern_ledger.domain.facts import evidence_appended, state_changed
from tavern_ledger.domain.judgement import Refused, verdict
from tavern_ledger.domain.records import EvidenceRow
from tests.unit.ledger.builders import at


def _claim(id_: str, seq: int, of: str, **overrides: object) -> EvidenceRow:
    row = EvidenceRow(
        id=id_,
        scope_id="chat-a",
        session_id="s1",
        source_class="user_explicit",
        authority="user_explicit",
        claim_domain="user_fact",
        content=id_,
        content_hash=id_,
        observed_at=at(seq),
        source_label="user",
        metadata={"claim": {"kind": "fact", "of": of, "n": 0}},
    )
    return replace(row, **overrides)  # type: ignore[arg-type]


OLD, NEW = _claim("old", 2, "m1"), _claim("new", 9, "m2")


def test_an_earlier_claim_of_the_same_speaker_is_ended() -> None:
    judged = verdict(NEW, ["old", "old"], {"old": OLD})
    assert ([t.id for t in judged.to_end], judged.unchanged) == (["old"], ())


def test_a_target_the_claim_already_ended_is_unchanged() -> None:
    ended = replace(OLD, state="superseded")
    judged = verdict(replace(NEW, supersedes=("old",)), ["old"], {"old": ended})
    assert (judged.to_end, judged.unchanged) == ((), ("old",))


@pytest.mark.parametrize(
    "target",
    [
        replace(OLD, scope_id="chat-b"),
        replace(OLD, source_label="user:bob"),
        replace(OLD, observed_at=at(12)),
        replace(OLD, metadata={"claim": {"kind": "question", "of": "m1"}}),
        replace(OLD, metadata={"claim": {"kind": "fact", "of": "m2"}}),
        replace(OLD, state="superseded"),
        replace(OLD, metadata={}),
    ],
    ids=["scope", "speaker", "later", "question", "same-message", "ended-by-other", "message"],
)
def test_a_target_out_of_reach_refuses_the_whole_judgement(target: EvidenceRow) -> None:
    with pytest.raises(Refused):
        verdict(NEW, ["old"], {"old": target})


def test_an_unknown_target_or_a_claim_not_of_fact_refuses() -> None:
    with pytest.raises(Refused):
        verdict(NEW, ["missing"], {})
    with pytest.raises(Refused):
        verdict(replace(NEW, state="superseded"), ["old"], {"old": OLD})


def test_the_ledger_facts_name_the_speaker_and_what_replaced_a_claim() -> None:
    appended = evidence_appended(replace(OLD, content_hash="0" * 64), at(3))
    assert appended.payload.source_label == "user"
    ended = replace(OLD, state="superseded")
    fact = state_changed(ended, "active", 7, "judged", at(3), "consolidator", replaced_by="new")
    assert (fact.payload.to_state, fact.payload.replaced_by) == ("superseded", "new")
