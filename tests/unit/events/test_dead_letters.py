"""Dead-letter records keep the original bytes (capped), and round-trip."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tavern_events.dlq import (
    DATA_CAP_BYTES,
    DeadLetter,
    data_fields,
    decode_dead_letter,
    encode_dead_letter,
)
from tavern_events.errors import ContractError


def _record(data: bytes) -> DeadLetter:
    return DeadLetter(
        id="019cadd3-9000-7abc-8def-0123456789ab",
        service="projector",
        consumer="projector-chats",
        stream="SESSIONS",
        stream_seq=4711,
        subject="tavern.session.s_1.turn.start",
        deliveries=5,
        reason="max deliveries reached: invalid TurnStarted: payload.claimed: Field required",
        error_type="ContractError",
        ts=datetime(2026, 3, 2, 9, 20, tzinfo=UTC),
        headers={"Nats-Msg-Id": "019cadd3-8054-7ebc-ad21-d641cae66e12"},
        **data_fields(data),
    )


def test_dead_letter_round_trips() -> None:
    record = _record(b'{"type": "turn/start"}')
    assert decode_dead_letter(encode_dead_letter(record)) == record


def test_dead_letter_keeps_small_data_whole() -> None:
    record = _record(b"\x00\xffpoison")
    assert record.data() == b"\x00\xffpoison"
    assert not record.data_truncated
    assert record.data_size == 8


def test_dead_letter_caps_large_data() -> None:
    big = b"x" * (DATA_CAP_BYTES + 10)
    record = _record(big)
    assert record.data() == big[:DATA_CAP_BYTES]
    assert record.data_truncated
    assert record.data_size == len(big)


def test_dead_letter_subject_names_the_service() -> None:
    assert _record(b"").dlq_subject == "tavern.dlq.projector"


def test_decode_dead_letter_refuses_garbage() -> None:
    with pytest.raises(ContractError):
        decode_dead_letter(b"{}")
