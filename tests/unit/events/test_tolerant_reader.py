"""Readers skip and count what they don't know, and refuse what is malformed."""

from __future__ import annotations

from datetime import UTC
from typing import Any

import pytest

from tavern_events.envelope import SessionEvent
from tavern_events.errors import ContractError, UnknownEventError
from tavern_events.skips import SkipCounter, Skipped
from tavern_events.turn import TurnStarted
from tavern_events.union import CURRENT_VERSIONS, Decoded, decode, decode_or_skip
from tests.unit.events.goldens import golden, golden_bytes


def _unknown_type() -> dict[str, Any]:
    return {**golden("turn/start"), "type": "turn/paused", "payload": {"anything": [1, 2]}}


def _newer_version() -> dict[str, Any]:
    newer = CURRENT_VERSIONS["turn/start"] + 1
    return {**golden("turn/start"), "v": newer, "payload": {"reshaped": True}}


def test_decode_or_skip_returns_known_event() -> None:
    result = decode_or_skip(golden_bytes("turn/start"))
    assert isinstance(result, Decoded)
    assert isinstance(result.event, TurnStarted)


def test_decode_skips_unknown_type() -> None:
    counter = SkipCounter()
    result = decode_or_skip(_unknown_type(), counter)
    assert result == Skipped("unknown_type", "turn/paused", 1)
    assert counter.by_reason == {"unknown_type": 1}
    assert counter.by_type == {"turn/paused": 1}


def test_decode_skips_newer_version() -> None:
    counter = SkipCounter()
    result = decode_or_skip(_newer_version(), counter)
    assert isinstance(result, Skipped)
    assert result.reason == "newer_version"
    assert result.v == CURRENT_VERSIONS["turn/start"] + 1
    assert counter.by_reason == {"newer_version": 1}


def test_skip_counter_counts_by_reason_and_type() -> None:
    counter = SkipCounter()
    for data in (_unknown_type(), _unknown_type(), _newer_version()):
        decode_or_skip(data, counter)
    assert counter.total == 3
    assert counter.by_reason == {"unknown_type": 2, "newer_version": 1}
    assert counter.by_type == {"turn/paused": 2, "turn/start": 1}


def test_decode_or_skip_counts_nothing_for_known_events() -> None:
    counter = SkipCounter()
    decode_or_skip(golden("turn/end"), counter)
    assert counter.total == 0


def test_decode_raises_unknown_event_for_unknown_type() -> None:
    with pytest.raises(UnknownEventError) as info:
        decode(_unknown_type())
    assert info.value.skipped.reason == "unknown_type"


def test_unknown_event_is_not_a_contract_error() -> None:
    assert not issubclass(UnknownEventError, ContractError)


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe\x00",
        b"[1, 2, 3]",
        b'"turn/start"',
        b"{}",
        b'{"type": 5}',
        b'{"type": "turnstart"}',
        b'{"type": ""}',
    ],
    ids=["text", "binary", "array", "string", "no-type", "int-type", "no-slash", "empty-type"],
)
def test_decode_raises_contract_error_for_malformed_data(data: bytes) -> None:
    with pytest.raises(ContractError):
        decode_or_skip(data)


@pytest.mark.parametrize("version", ["1", 0, -1, True, 1.5, None])
def test_decode_raises_contract_error_for_invalid_version(version: Any) -> None:
    with pytest.raises(ContractError, match="version"):
        decode({**golden("turn/start"), "v": version})


def test_decode_raises_contract_error_for_wrong_payload_shape() -> None:
    data = golden("tool/result")
    del data["payload"]["call_id"]
    with pytest.raises(ContractError, match=r"ToolResult.*payload\.call_id"):
        decode_or_skip(data)


def test_decode_raises_contract_error_for_missing_envelope_field() -> None:
    data = golden("turn/start")
    del data["session_id"]
    with pytest.raises(ContractError, match="session_id"):
        decode(data)


def test_decode_refuses_naive_timestamps() -> None:
    with pytest.raises(ContractError, match="ts"):
        decode({**golden("turn/start"), "ts": "2026-03-02T09:14:05"})


def test_decode_normalises_timestamps_to_utc() -> None:
    event = decode({**golden("turn/start"), "ts": "2026-03-02T10:14:05.946+01:00"}, TurnStarted)
    assert event.ts == decode(golden("turn/start"), TurnStarted).ts
    assert event.ts.tzinfo is UTC


def test_decode_with_expect_narrows_the_event() -> None:
    assert isinstance(decode(golden_bytes("turn/start"), SessionEvent), TurnStarted)


def test_decode_with_expect_refuses_another_kind_of_event() -> None:
    with pytest.raises(ContractError, match="expected SessionEvent"):
        decode(golden_bytes("memory/changed"), SessionEvent)


def test_decode_or_skip_with_expect_still_skips_unknown_types() -> None:
    assert isinstance(decode_or_skip(_unknown_type(), None, SessionEvent), Skipped)
