"""The pure parts of a model's judgement of a new claim: which earlier claims it sees, the
prompt, and the strict reading of its answer (anything doubtful applies nothing)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from tavern_consolidator.domain.judge import Claim, Judged, Unusable, parse, prompt, related

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _claim(id_: str, text: str, minute: int, **kw: str) -> Claim:
    fields = {"scope_id": "chat-a", "speaker": "user", "claim_of": f"m-{id_}", **kw}
    return Claim(id=id_, text=text, observed_at=T0 + timedelta(minutes=minute), **fields)


NEW = _claim("new", "My sister lives in Lisbon", 10)
PORTO = _claim("porto", "My sister lives in Porto", 1)
NAME = _claim("name", "My sister's name is Lena", 1, claim_of="m-porto")
TEA = _claim("tea", "I drink green tea every morning", 2)


def test_related_claims_are_the_speakers_earlier_ones_sharing_words_most_first() -> None:
    later = _claim("later", "My sister lives in Faro", 20)
    bob = _claim("bob", "My sister lives in Braga", 3, speaker="user:bob")
    other = _claim("other", "My sister lives in Evora", 3, scope_id="chat-b")
    same = _claim("same", "My sister lives in Lisbon now", 10, claim_of="m-new")
    found = related(NEW, [TEA, NAME, later, bob, other, same, PORTO])
    assert [c.id for c in found] == ["porto", "name"]


def test_the_prompt_shows_labels_and_texts_never_ids() -> None:
    messages = prompt(NEW, [PORTO, NAME])
    assert [m["role"] for m in messages] == ["system", "user"]
    body = json.loads(messages[1]["content"].partition("\n")[2])
    assert body == {
        "new": "My sister lives in Lisbon",
        "earlier": [
            {"label": "E1", "text": "My sister lives in Porto"},
            {"label": "E2", "text": "My sister's name is Lena"},
        ],
    }
    assert "porto" not in messages[1]["content"]


def test_an_update_names_the_claims_behind_its_labels() -> None:
    answer = '```json\n{"decision": "UPDATE", "replaces": ["E1"], "reason": "moved"}\n```'
    assert parse(answer, [PORTO, NAME]) == Judged("update", ("porto",), "moved")


def test_add_replaces_nothing_even_when_it_names_labels() -> None:
    assert parse('{"decision": "add", "replaces": ["E1"]}', [PORTO]) == Judged("add", ())


def test_doubtful_answers_are_unusable() -> None:
    for answer in (
        "Sure! The sister moved.",
        "[]",
        '{"decision": "delete", "replaces": ["E1"]}',
        '{"decision": "update", "replaces": ["E3"]}',
        '{"decision": "update", "replaces": "E1"}',
        '{"decision": "contradict", "replaces": []}',
        '{"decision": "update", "replaces": ["porto"]}',
    ):
        assert isinstance(parse(answer, [PORTO, NAME]), Unusable), answer
