"""Every event type round-trips through encode/decode and matches its golden payload."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from tavern_events import subjects
from tavern_events.asset import AssetImported, AssetRemoved, AssetUpdated
from tavern_events.errors import ContractError
from tavern_events.union import (
    ASSET_EVENT_ADAPTER,
    ASSET_EVENT_MODELS,
    CURRENT_VERSIONS,
    EVENT_MODELS,
    INPUT_ADAPTER,
    INPUT_MODELS,
    LEDGER_FACT_ADAPTER,
    LEDGER_FACT_MODELS,
    SESSION_EVENT_ADAPTER,
    SESSION_EVENT_MODELS,
    decode,
    encode,
)
from tests.unit.events.goldens import golden, golden_bytes, golden_files, type_of_file

ALL_TYPES = sorted(EVENT_MODELS)


@pytest.mark.parametrize("event_type", ALL_TYPES)
def test_every_type_has_a_golden_payload(event_type: str) -> None:
    assert golden(event_type)["type"] == event_type


@pytest.mark.parametrize("path", golden_files(), ids=lambda p: p.name)
def test_every_golden_file_names_a_known_type_and_version(path: Any) -> None:
    event_type, version = type_of_file(path)
    assert event_type in CURRENT_VERSIONS
    assert json.loads(path.read_bytes())["type"] == event_type
    if version is not None:
        assert version < CURRENT_VERSIONS[event_type]


@pytest.mark.parametrize("event_type", ALL_TYPES)
def test_decode_then_encode_reproduces_the_golden_payload(event_type: str) -> None:
    event = decode(golden_bytes(event_type))
    assert type(event) is EVENT_MODELS[event_type]
    assert json.loads(encode(event)) == golden(event_type)


@pytest.mark.parametrize("event_type", ALL_TYPES)
def test_encode_then_decode_returns_an_equal_event(event_type: str) -> None:
    event = decode(golden(event_type))
    assert decode(encode(event)) == event


@pytest.mark.parametrize("event_type", ALL_TYPES)
def test_golden_payload_is_written_at_the_current_version(event_type: str) -> None:
    assert golden(event_type).get("v", 1) == CURRENT_VERSIONS[event_type]


@pytest.mark.parametrize("event_type", ALL_TYPES)
def test_encode_emits_only_declared_fields(event_type: str) -> None:
    event = decode(golden(event_type))
    _assert_declared(event, json.loads(encode(event)))


def _assert_declared(model: BaseModel, data: dict[str, Any]) -> None:
    assert set(data) <= set(type(model).model_fields), type(model).__name__
    for key, value in data.items():
        _walk(getattr(model, key), value)


def _walk(value: Any, data: Any) -> None:
    if isinstance(value, BaseModel):
        _assert_declared(value, data)
    elif isinstance(value, tuple):
        for item, item_data in zip(value, data, strict=True):
            _walk(item, item_data)


def test_encode_writes_compact_json() -> None:
    raw = encode(decode(golden("turn/start")))
    assert b"\n" not in raw
    assert b'": ' not in raw


def test_encode_refuses_a_bare_envelope() -> None:
    from tavern_events.envelope import SessionEvent

    bare = SessionEvent.model_validate({**golden("turn/start"), "type": "turn/start"})
    with pytest.raises(ContractError):
        encode(bare)


def test_event_types_are_unique_across_envelopes() -> None:
    families = (SESSION_EVENT_MODELS, INPUT_MODELS, LEDGER_FACT_MODELS, ASSET_EVENT_MODELS)
    assert sum(len(f) for f in families) == len(EVENT_MODELS)


@pytest.mark.parametrize("event_type", ALL_TYPES)
def test_event_type_is_a_lowercase_family_and_name(event_type: str) -> None:
    family, name = subjects.split_type(event_type)
    assert f"{family}/{name}" == event_type


@pytest.mark.parametrize(
    ("adapter", "models"),
    [
        (SESSION_EVENT_ADAPTER, SESSION_EVENT_MODELS),
        (INPUT_ADAPTER, INPUT_MODELS),
        (LEDGER_FACT_ADAPTER, LEDGER_FACT_MODELS),
        (ASSET_EVENT_ADAPTER, ASSET_EVENT_MODELS),
    ],
)
def test_union_adapter_picks_the_model_by_type(adapter: Any, models: Any) -> None:
    for model in models:
        event_type = model.model_fields["type"].default
        assert type(adapter.validate_python(golden(event_type))) is model


def test_decode_ignores_unknown_fields() -> None:
    data = golden("tool/call")
    data["shiny_new_field"] = 1
    data["payload"]["also_new"] = True
    assert decode(data) == decode(golden("tool/call"))


def test_decode_does_not_mutate_a_dict_input() -> None:
    data = golden("session/created", 1)
    before = json.dumps(data, sort_keys=True)
    decode(data)
    assert json.dumps(data, sort_keys=True) == before


@pytest.mark.parametrize("event_type", ["asset/imported", "asset/updated", "asset/removed"])
def test_an_asset_event_from_before_owners_belongs_to_the_local_owner(event_type: str) -> None:
    old = golden(event_type)
    del old["payload"]["owner"]
    assert _asset_owner(json.dumps(old).encode()) == "local"
    assert _asset_owner(golden_bytes(event_type)) == "ren"


def _asset_owner(data: bytes) -> str:
    event = decode(data)
    assert isinstance(event, AssetImported | AssetUpdated | AssetRemoved)
    return event.payload.owner
