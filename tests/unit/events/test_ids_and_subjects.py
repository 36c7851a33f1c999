"""Subjects are built from the events; ids that could escape a subject are refused."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tavern_events import subjects
from tavern_events.envelope import AssetEvent, InputCommand, LedgerFact, SessionEvent
from tavern_events.errors import ContractError
from tavern_events.subjects import InvalidIdError
from tavern_events.union import EVENT_MODELS, decode, msg_id_for, subject_for
from tests.unit.events.goldens import golden

BAD_IDS = ["a.b", "*", ">", "s_1.>", "a b", "x" * 65, "", "tab\t", "ünïcode", "nl\n"]
BAD_ID_NAMES = [
    "dot",
    "star",
    "gt",
    "dot-gt",
    "space",
    "65-chars",
    "empty",
    "tab",
    "non-ascii",
    "trailing-newline",
]


def _expected_subject(event_type: str) -> str:
    data = golden(event_type)
    family, name = event_type.split("/")
    model = EVENT_MODELS[event_type]
    if issubclass(model, SessionEvent):
        return f"tavern.session.{data['session_id']}.{family}.{name}"
    if issubclass(model, InputCommand):
        return f"tavern.input.{data['session_id']}.{name}"
    if issubclass(model, LedgerFact):
        return f"tavern.ledger.{data['scope_id']}.{family}.{name}"
    return f"tavern.asset.{data['payload']['kind']}.{data['asset_id']}.{name}"


@pytest.mark.parametrize("event_type", sorted(EVENT_MODELS))
def test_subject_for_builds_the_subject_of_every_type(event_type: str) -> None:
    subject = subject_for(decode(golden(event_type)))
    assert subject == _expected_subject(event_type)
    assert "*" not in subject
    assert ">" not in subject


@pytest.mark.parametrize("event_type", sorted(EVENT_MODELS))
def test_session_and_input_subjects_name_their_session(event_type: str) -> None:
    event = decode(golden(event_type))
    if isinstance(event, SessionEvent | InputCommand):
        assert subjects.session_id_of(subject_for(event)) == event.session_id


def test_session_subjects_fall_under_the_session_filter() -> None:
    event = decode(golden("assistant/message"), SessionEvent)
    prefix = subjects.session_filter(event.session_id).removesuffix(">")
    assert subject_for(event).startswith(prefix)


def test_msg_id_is_the_event_id_or_the_input_id() -> None:
    assert msg_id_for(decode(golden("tool/call"))) == golden("tool/call")["id"]
    assert msg_id_for(decode(golden("input/cancel"))) == golden("input/cancel")["input_id"]


@pytest.mark.parametrize("bad", BAD_IDS, ids=BAD_ID_NAMES)
def test_validate_id_refuses_unsafe_ids(bad: str) -> None:
    assert not subjects.is_valid_id(bad)
    with pytest.raises(InvalidIdError):
        subjects.validate_id(bad)


@pytest.mark.parametrize("good", ["a", "s_01JNQ4W7ZK8V3M2R6T9Y5B1C0D", "x" * 64, "A-b_9"])
def test_validate_id_accepts_safe_ids(good: str) -> None:
    assert subjects.validate_id(good) == good


@pytest.mark.parametrize("bad", BAD_IDS, ids=BAD_ID_NAMES)
@pytest.mark.parametrize(
    ("event_type", "field"),
    [
        ("turn/start", "session_id"),
        ("turn/start", "id"),
        ("turn/start", "agent_id"),
        ("input/message", "session_id"),
        ("input/message", "input_id"),
        ("memory/changed", "scope_id"),
        ("asset/imported", "asset_id"),
    ],
)
def test_decode_refuses_unsafe_envelope_ids(event_type: str, field: str, bad: str) -> None:
    with pytest.raises(ContractError, match=field):
        decode({**golden(event_type), field: bad})


@pytest.mark.parametrize("bad", BAD_IDS, ids=BAD_ID_NAMES)
def test_decode_refuses_unsafe_payload_ids(bad: str) -> None:
    data = golden("session/forked")
    data["payload"]["child_session_id"] = bad
    with pytest.raises(ContractError, match="child_session_id"):
        decode(data)


@pytest.mark.parametrize("bad", BAD_IDS, ids=BAD_ID_NAMES)
def test_models_refuse_unsafe_ids_at_construction(bad: str) -> None:
    with pytest.raises(ValidationError):
        SessionEvent.model_validate({**golden("turn/start"), "session_id": bad})
    with pytest.raises(ValidationError):
        LedgerFact.model_validate({**golden("memory/changed"), "scope_id": bad})
    with pytest.raises(ValidationError):
        AssetEvent.model_validate({**golden("asset/removed"), "asset_id": bad})


@pytest.mark.parametrize("bad", BAD_IDS, ids=BAD_ID_NAMES)
def test_subject_builders_refuse_unsafe_ids(bad: str) -> None:
    with pytest.raises(InvalidIdError):
        subjects.session_event(bad, "turn/start")
    with pytest.raises(InvalidIdError):
        subjects.session_input(bad, "message")
    with pytest.raises(InvalidIdError):
        subjects.ledger_fact(bad, "memory/changed")
    with pytest.raises(InvalidIdError):
        subjects.asset_event("character", bad, "asset/imported")
