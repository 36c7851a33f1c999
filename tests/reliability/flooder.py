"""A user who floods every service with requests at and over the size limit, as a process of
its own (`python -m tests.reliability.flooder URL PASSWORD`), so the flood's own work does not
slow the test's ordinary requests. Prints one JSON line per answer: service, size, code, s.

The flood is bounded: `WAVES` waves of `PER_WAVE` concurrent requests per service.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import ValidationError

from tavern_events import subjects
from tavern_events.replies import ErrorReply
from tavern_runtime import principals
from tavern_runtime.bus import login_options
from tavern_runtime.settings import TavernSettings
from tests.support import signed_nats

LIMIT = TavernSettings().rpc_max_request_bytes
"""The documented request limit every service reads up to (`TAVERN_RPC_MAX_REQUEST_BYTES`)."""
FLOOD_DEADLINE_S = 60.0
"""What a flooding caller waits for each of its answers: the flood is queued behind itself."""
WAVES = 3
PER_WAVE = 32
"""Concurrent requests per service in one wave."""
FLOODED = {
    "ledger": ("memory.search", "recall", "query", "variable.get"),
    "projector": ("history.search", "character.get", "lore.search", "scene.get"),
    "consolidator": ("profile.get", "approvals.next"),
    "loop": ("ping",),
}


def padded(size: int) -> bytes:
    """A JSON request of exactly `size` bytes: a session's query, padded."""
    head = b'{"session_id": "flood-s1", "query": "'
    tail = b'"}'
    return head + b"q" * (size - len(head) - len(tail)) + tail


SIZES = [
    ("at the limit", padded(LIMIT)),
    ("at the limit", padded(LIMIT)),
    ("just over the limit", padded(LIMIT + 1)),
    ("over the limit by 32 KiB", padded(LIMIT + 32 * 1024)),
]
"""Half of a flood at the limit (parsed and served, or shed), half over it (`too_large`)."""


@dataclass
class Answer:
    service: str
    size: str
    code: str  # an error code, "answered", or "NO REPLY (...)" / "NOT THE MODEL"
    seconds: float


async def ask(nc: Any, service: str, operation: str, size: str, body: bytes) -> Answer:
    started = time.monotonic()
    try:
        msg = await nc.request(subjects.rpc(service, operation), body, timeout=FLOOD_DEADLINE_S)
    except Exception as exc:
        return Answer(service, size, f"NO REPLY ({type(exc).__name__})", 0.0)
    took = time.monotonic() - started
    try:
        reply = json.loads(msg.data)
    except ValueError:
        return Answer(service, size, "NOT THE MODEL", took)
    if not isinstance(reply, dict) or "error" not in reply:
        return Answer(service, size, "answered", took)
    try:
        return Answer(service, size, ErrorReply.model_validate(reply).error.code, took)
    except ValidationError:
        return Answer(service, size, "NOT THE MODEL", took)


async def flood(url: str, password: str) -> list[Answer]:
    nc = await signed_nats(
        url, principals.user("mallory"), name="flooder", **login_options("operator", password)
    )
    answers: list[Answer] = []
    try:
        for _wave in range(WAVES):
            wave = []
            for service, operations in FLOODED.items():
                for i in range(PER_WAVE):
                    size, body = SIZES[i % len(SIZES)]
                    wave.append(ask(nc, service, operations[i % len(operations)], size, body))
            answers += await asyncio.gather(*wave)
    finally:
        await nc.close()
    return answers


def main() -> None:
    url, password = sys.argv[1], sys.argv[2]
    for answer in asyncio.run(flood(url, password)):
        print(json.dumps(asdict(answer)))


if __name__ == "__main__":
    main()
