"""What a JetStream delivery's reply subject tells, read without building nats-py's `Metadata`.

`Msg.metadata` parses every field of the reply subject into a frozen dataclass with a
`datetime`; a consumer that only needs the stream sequence spends several microseconds per
message on it (a tenth of the ledger's ingestion work, a replay's largest fixed cost). The
reply subject is `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ts>.
<pending>` (9 tokens), or with a domain and an account hash after `ACK` (12 tokens, 11 from
older servers).
"""

from __future__ import annotations

from typing import NamedTuple

from nats.aio.msg import Msg
from nats.errors import NotJSMessageError

_V1_TOKENS = 9
_V2_OFFSET = 2
"""Tokens a reply subject with a domain and an account hash has before the stream's name."""
_STREAM_SEQ, _STORED_NS, _PENDING = 5, 7, 8


class Delivery(NamedTuple):
    stream_seq: int
    stored_ns: int
    """When the stream stored the message, in nanoseconds since the epoch."""
    pending: int
    """How many messages the consumer still holds after this one."""


def delivery(msg: Msg) -> Delivery:
    """The stream sequence, stored time and pending count of a JetStream delivery; raises
    `NotJSMessageError` (as nats-py does) for a message that is not one."""
    reply = msg.reply
    tokens = reply.split(".") if reply and reply.startswith("$JS.ACK.") else []
    if len(tokens) == _V1_TOKENS:
        offset = 0
    elif len(tokens) >= _V1_TOKENS + _V2_OFFSET:
        offset = _V2_OFFSET
    else:
        raise NotJSMessageError
    return Delivery(
        int(tokens[offset + _STREAM_SEQ]),
        int(tokens[offset + _STORED_NS]),
        int(tokens[offset + _PENDING]),
    )


def stream_sequence(msg: Msg) -> int:
    """The message's sequence in its stream (`msg.metadata.sequence.stream`)."""
    return delivery(msg).stream_seq


def pending(msg: Msg) -> int:
    """How many messages the consumer still holds after this one (`metadata.num_pending`)."""
    return delivery(msg).pending
