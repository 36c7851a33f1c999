"""Event ids: UUIDv7 strings (time-ordered), also used as `Nats-Msg-Id`.

Adapters call `new_id()`; pure domain code receives ids as arguments.
"""

from __future__ import annotations

import os
import time
import uuid


def uuid7(unix_ms: int | None = None, rand: bytes | None = None) -> uuid.UUID:
    """A RFC 9562 version 7 UUID from a millisecond timestamp and 10 random bytes."""
    ms = int(time.time() * 1000) if unix_ms is None else unix_ms
    tail = os.urandom(10) if rand is None else rand
    value = (ms & ((1 << 48) - 1)) << 80
    value |= int.from_bytes(tail, "big") & ((1 << 80) - 1)
    value &= ~(0xF << 76)
    value |= 0x7 << 76  # version
    value &= ~(0x3 << 62)
    value |= 0x2 << 62  # variant
    return uuid.UUID(int=value)


def new_id() -> str:
    """A fresh UUIDv7 as a hyphenated string (36 chars, a legal subject id)."""
    return str(uuid7())
