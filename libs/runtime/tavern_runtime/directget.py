"""Batched direct gets: read the messages of one subject filter without creating a consumer.

A session log is read this way when a runner takes a session over: no consumer to create and
delete (a stream allows at most 1000 at a time), one request per batch of messages.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from nats.aio.client import Client
from nats.aio.msg import Msg

from tavern_runtime.errors import TransientError

BATCH = 256
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class StoredMsg:
    seq: int
    subject: str
    data: bytes


async def batch_get(
    nc: Client,
    stream: str,
    subject: str,
    from_seq: int,
    batch: int = BATCH,
    timeout: float = TIMEOUT_S,
) -> tuple[list[StoredMsg], int]:
    """Up to `batch` messages on `subject` from stream seq `from_seq`, and how many remain."""
    queue: asyncio.Queue[Msg] = asyncio.Queue()
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, cb=queue.put)
    request = {"seq": max(1, from_seq), "next_by_subj": subject, "batch": batch}
    try:
        await nc.publish(f"$JS.API.DIRECT.GET.{stream}", json.dumps(request).encode(), reply=inbox)
        found: list[StoredMsg] = []
        while True:
            try:
                msg = await asyncio.wait_for(queue.get(), timeout)
            except TimeoutError as exc:
                raise TransientError("direct get did not answer", stream=stream) from exc
            headers = msg.headers or {}
            status = headers.get("Status")
            if status == "204":
                return found, int(headers.get("Nats-Num-Pending", 0))
            if status == "404":
                return found, 0
            if status:
                raise TransientError("direct get failed", stream=stream, status=status)
            found.append(
                StoredMsg(int(headers["Nats-Sequence"]), headers["Nats-Subject"], msg.data)
            )
    finally:
        await sub.unsubscribe()


async def scan(
    nc: Client, stream: str, subject: str, from_seq: int = 1, batch: int = BATCH
) -> AsyncIterator[StoredMsg]:
    """Every message on `subject` from `from_seq` to the end as it is now, in stream order."""
    seq = from_seq
    while True:
        found, pending = await batch_get(nc, stream, subject, seq, batch)
        for msg in found:
            yield msg
        if not found or pending == 0:
            return
        seq = found[-1].seq + 1
