"""Older stored shapes are upcast on read; only the current shape lives in the models."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tavern_events.errors import ContractError
from tavern_events.session import SessionCreated
from tavern_events.union import CURRENT_VERSIONS, decode, encode
from tavern_events.upcasters import UPCASTERS, missing_steps, session_created_v1, upcast
from tests.unit.events.goldens import golden, golden_bytes


def test_session_created_is_at_version_two() -> None:
    assert CURRENT_VERSIONS["session/created"] == 2


def test_every_versioned_type_has_a_complete_upcaster_chain() -> None:
    assert missing_steps(CURRENT_VERSIONS) == []


def test_every_upcaster_targets_a_known_older_version() -> None:
    for event_type, version in UPCASTERS:
        assert version < CURRENT_VERSIONS[event_type]


def test_v1_session_created_without_context_mode_reads_as_dsh_native() -> None:
    event = decode(golden_bytes("session/created", 1))
    assert isinstance(event, SessionCreated)
    assert event.v == 2
    assert event.payload.architecture == "agent-tavern"
    assert event.payload.context_mode == "dsh-native"


def test_v1_session_created_reencodes_as_v2_with_the_mode() -> None:
    expected = golden("session/created", 1)
    expected["v"] = 2
    expected["payload"]["context_mode"] = "dsh-native"
    expected["payload"]["owner"] = "local"  # written before owners: the default owner's
    assert json.loads(encode(decode(golden("session/created", 1)))) == expected


def test_v1_st_session_created_keeps_no_context_mode() -> None:
    data = golden("session/created", 1)
    data["payload"]["architecture"] = "st"
    event = decode(data)
    assert isinstance(event, SessionCreated)
    assert event.payload.context_mode is None


def test_v1_session_created_keeps_an_explicit_context_mode() -> None:
    data = golden("session/created", 1)
    data["payload"]["context_mode"] = "agent-managed"
    event = decode(data)
    assert isinstance(event, SessionCreated)
    assert event.payload.context_mode == "agent-managed"


def test_upcaster_does_not_mutate_its_input() -> None:
    data = golden("session/created", 1)
    before = json.dumps(data, sort_keys=True)
    session_created_v1(data)
    upcast(data, "session/created", 1, 2)
    assert json.dumps(data, sort_keys=True) == before


def test_upcast_sets_the_version_it_reached() -> None:
    assert upcast(golden("session/created", 1), "session/created", 1, 2)["v"] == 2


def test_upcast_without_a_registered_step_raises_contract_error() -> None:
    with pytest.raises(ContractError, match="no upcaster"):
        upcast({"type": "turn/start", "v": 1}, "turn/start", 1, 2)


def test_v2_agent_tavern_without_context_mode_is_refused() -> None:
    data = golden("session/created")
    del data["payload"]["context_mode"]
    with pytest.raises(ContractError, match="context_mode"):
        decode(data)


def test_models_refuse_to_be_built_at_an_old_version() -> None:
    data = golden("session/created")
    data["v"] = 1
    with pytest.raises(ValidationError, match="v"):
        SessionCreated.model_validate(data)


@pytest.mark.parametrize("payload", [[1, 2], "agent-tavern", None])
def test_malformed_v1_payload_raises_contract_error(payload: object) -> None:
    data = {**golden("session/created", 1), "payload": payload}
    with pytest.raises(ContractError, match="payload"):
        decode(data)


def test_an_upcaster_that_breaks_on_bad_data_raises_contract_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(raw: dict[str, object]) -> dict[str, object]:
        raise KeyError("payload")

    monkeypatch.setitem(UPCASTERS, ("test/broken", 1), broken)
    with pytest.raises(ContractError, match="cannot upcast"):
        upcast({"type": "test/broken", "v": 1}, "test/broken", 1, 2)
