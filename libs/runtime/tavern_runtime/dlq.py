"""Dead letters: park a poison message on `tavern.dlq.<service>` (DLQ stream), then terminate it.

Also turns the server's MAX_DELIVERIES advisories into dead letters, so a message that exhausted
its redeliveries is kept with the reason even when no handler got to call `dead_letter`.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import Header, PubAck, RawStreamMsg

from tavern_events.dlq import DeadLetter, data_fields, encode_dead_letter
from tavern_events.ids import new_id
from tavern_events.streams import DLQ
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

MAX_DELIVERIES_REASON = "max deliveries exhausted"
ADVISORY_PREFIX = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
_TRANSPORT_HEADERS = ("Nats-Stream", "Nats-Subject", "Nats-Sequence", "Nats-Time-Stamp")


@dataclass(frozen=True)
class Origin:
    """Where a poison message sits: its stream position and how often it was delivered."""

    stream: str
    stream_seq: int
    subject: str
    deliveries: int


def dead_letter_id(stream: str, stream_seq: int, consumer: str) -> str:
    """The `Nats-Msg-Id` of a dead letter: one record per stored message and consumer, however
    often sent (a message several consumers refuse gets a record from each, with its reason)."""
    return f"dlq-{stream}-{stream_seq}-{consumer}"


def build_record(
    origin: Origin,
    *,
    service: str,
    consumer: str,
    reason: str,
    error_type: str,
    headers: dict[str, str] | None,
    data: bytes | None,
    now: datetime,
) -> DeadLetter:
    """The dead-letter record of one message (data kept as capped base64)."""
    kept = {k: v for k, v in (headers or {}).items() if k not in _TRANSPORT_HEADERS}
    return DeadLetter.model_validate(
        {
            "id": new_id(),
            "service": service,
            "consumer": consumer,
            "stream": origin.stream,
            "stream_seq": origin.stream_seq,
            "subject": origin.subject,
            "deliveries": origin.deliveries,
            "reason": reason[:2000],
            "error_type": error_type[:200],
            "ts": now,
            "headers": kept,
            **data_fields(data or b""),
        }
    )


async def publish_record(js: JetStreamContext, record: DeadLetter) -> PubAck:
    """Store `record` on the DLQ stream; the same consumer's second record for the same message
    is deduplicated."""
    headers = {
        Header.MSG_ID.value: dead_letter_id(record.stream, record.stream_seq, record.consumer)
    }
    ack = await js.publish(
        record.dlq_subject, encode_dead_letter(record), stream=DLQ.name, headers=headers
    )
    log.warning(
        "message_dead_lettered",
        consumer=record.consumer,
        subject=record.subject,
        stream_seq=record.stream_seq,
        reason=record.reason,
        duplicate=bool(ack.duplicate),
    )
    return ack


async def dead_letter(
    js: JetStreamContext,
    msg: Msg,
    *,
    service: str,
    consumer: str,
    reason: str,
    error: BaseException | None = None,
) -> DeadLetter:
    """Park a JetStream message on the DLQ, then `term` it so it is never redelivered.

    With FastStream, pass `message.raw_message`; its ack policy then leaves the message alone.
    """
    meta = msg.metadata
    origin = Origin(meta.stream, meta.sequence.stream, msg.subject, meta.num_delivered)
    record = build_record(
        origin,
        service=service,
        consumer=consumer,
        reason=reason,
        error_type=type(error).__name__ if error else "Rejected",
        headers=msg.headers,
        data=msg.data,
        now=datetime.now(UTC),
    )
    await publish_record(js, record)
    # Only after the record is stored: a crash in between redelivers instead of losing it.
    with contextlib.suppress(nats.errors.MsgAlreadyAckdError):
        await msg.term()
    return record


def parse_advisory(data: bytes) -> tuple[Origin, str]:
    """Read a MAX_DELIVERIES advisory: {stream, consumer, stream_seq, deliveries}."""
    advisory = json.loads(data)
    origin = Origin(
        advisory["stream"], int(advisory["stream_seq"]), "", int(advisory["deliveries"])
    )
    return origin, str(advisory["consumer"])


async def on_max_deliveries(js: JetStreamContext, advisory: bytes, *, service: str) -> DeadLetter:
    """Dead-letter the message an advisory names, read back from its stream."""
    origin, consumer = parse_advisory(advisory)
    stored: RawStreamMsg = await js.get_msg(origin.stream, seq=origin.stream_seq)
    origin = Origin(origin.stream, origin.stream_seq, stored.subject or "?", origin.deliveries)
    record = build_record(
        origin,
        service=service,
        consumer=consumer,
        reason=MAX_DELIVERIES_REASON,
        error_type="MaxDeliveriesExceeded",
        headers=stored.headers,
        data=stored.data,
        now=datetime.now(UTC),
    )
    await publish_record(js, record)
    return record


async def watch_max_deliveries(
    nc: Client, js: JetStreamContext, *, service: str, stream: str, consumer: str = "*"
) -> Subscription:
    """Subscribe (in a queue group, so replicas share the work) to a consumer's advisories.

    Advisories are core NATS messages: one sent while no watcher runs is not seen here.
    """
    subject = f"{ADVISORY_PREFIX}.{stream}.{consumer}"

    async def handle(msg: Msg) -> None:
        try:
            await on_max_deliveries(js, msg.data, service=service)
        except Exception as exc:  # a watcher must outlive one bad advisory
            log.error("dead_letter_failed", subject=msg.subject, error=repr(exc))

    return await nc.subscribe(subject, queue=f"tavern-dlq-{service}", cb=handle)
