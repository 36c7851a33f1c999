"""Dead-letter records built from a poison message or an advisory (no IO)."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime

from tavern_events.dlq import DATA_CAP_BYTES
from tavern_runtime.dlq import Origin, build_record, dead_letter_id, parse_advisory

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ORIGIN = Origin("INPUTS", 42, "tavern.input.s1.message", 3)


def test_record_carries_reason_origin_and_data() -> None:
    record = build_record(
        ORIGIN,
        service="loop",
        consumer="loop-dispatch",
        reason="bad payload",
        error_type="ContractError",
        headers={"Nats-Msg-Id": "in-1", "Nats-Stream": "INPUTS"},
        data=b"{oops",
        now=NOW,
    )
    assert (record.stream, record.stream_seq, record.deliveries) == ("INPUTS", 42, 3)
    assert record.subject == "tavern.input.s1.message"
    assert record.reason == "bad payload"
    assert record.error_type == "ContractError"
    assert record.headers == {"Nats-Msg-Id": "in-1"}  # transport headers are dropped
    assert base64.b64decode(record.data_b64) == b"{oops"
    assert record.dlq_subject == "tavern.dlq.loop"


def test_record_caps_large_data_and_says_so() -> None:
    data = b"x" * (DATA_CAP_BYTES + 10)
    record = build_record(
        ORIGIN,
        service="loop",
        consumer="c",
        reason="r",
        error_type="E",
        headers=None,
        data=data,
        now=NOW,
    )
    assert len(record.data()) == DATA_CAP_BYTES
    assert record.data_truncated
    assert record.data_size == len(data)


def test_dead_letter_id_is_one_per_stored_message_and_consumer() -> None:
    assert dead_letter_id("INPUTS", 42, "loop-dispatch") == "dlq-INPUTS-42-loop-dispatch"
    assert dead_letter_id("SESSIONS", 7, "projector-chat") != dead_letter_id(
        "SESSIONS", 7, "ledger-ingest"
    )


def test_parse_advisory_reads_stream_position_and_consumer() -> None:
    advisory = {
        "type": "io.nats.jetstream.advisory.v1.max_deliver",
        "stream": "INPUTS",
        "consumer": "loop-dispatch",
        "stream_seq": 7,
        "deliveries": 5,
    }
    origin, consumer = parse_advisory(json.dumps(advisory).encode())
    assert (origin.stream, origin.stream_seq, origin.deliveries) == ("INPUTS", 7, 5)
    assert consumer == "loop-dispatch"
