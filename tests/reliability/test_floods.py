"""Request floods from a user connection against every service, through the real processes.

A user floods each service's RPCs with concurrent requests at the size limit, just over it and
far over it, while an operator keeps asking ordinary questions. Every service must keep its one
NATS connection (nats-server counts no slow consumer and no connection is replaced), keep
answering the ordinary questions within their deadline, and answer every flood request that
reached it with a reply of the common error model (or a real answer): `too_large` for the
oversized, `unavailable` (retryable) where it shed load, never silence. A request over the
bus's `max_payload` never leaves the client (nats-py refuses it before sending).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from nats.errors import MaxPayloadError
from pydantic import ValidationError

from tavern_events import subjects
from tavern_events.replies import ErrorReply
from tavern_runtime import principals
from tavern_runtime.bus import login_options
from tavern_runtime.settings import TavernSettings
from tests.reliability.report import REPORT, table
from tests.reliability.stack import Stack
from tests.support import signed_nats

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LIMIT = TavernSettings().rpc_max_request_bytes
"""The documented request limit every service reads up to (`TAVERN_RPC_MAX_REQUEST_BYTES`)."""
DEADLINE_S = 5.0
"""What an ordinary caller waits (the loop's tools wait 5 s for the ledger and projector)."""
FLOOD_DEADLINE_S = 30.0
"""What a flooding caller waits for each of its answers: the flood is queued behind itself."""
WAVES = 3
PER_WAVE = 64
"""Concurrent requests per service in one wave (bounded: the loop is `WAVES` x `PER_WAVE`)."""
FLOODED = {
    "ledger": ("memory.search", "recall", "query", "variable.get"),
    "projector": ("history.search", "character.get", "lore.search", "scene.get"),
    "consolidator": ("profile.get", "approvals.next"),
    "loop": ("ping",),
}
ORDINARY = {
    "ledger": "ping",
    "projector": "ping",
    "consolidator": "ping",
    "loop": "ping",
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
FAR_OVER = padded(5 * 1024 * 1024)


@dataclass
class Answer:
    service: str
    size: str
    code: str  # an error code, "answered", or "NO REPLY (...)" / "NOT THE MODEL"
    seconds: float


async def _ask(nc: Any, service: str, operation: str, size: str, body: bytes) -> Answer:
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


async def _flood(nc: Any) -> list[Answer]:
    asks = []
    for _wave in range(WAVES):
        wave = []
        for service, operations in FLOODED.items():
            for i in range(PER_WAVE):
                size, body = SIZES[i % len(SIZES)]
                operation = operations[i % len(operations)]
                wave.append(_ask(nc, service, operation, size, body))
        asks += await asyncio.gather(*wave)
    return asks


async def _probe(nc: Any, stop: asyncio.Event) -> list[tuple[str, float | None]]:
    """Ordinary questions to every service, every 0.2 s, until `stop`: (service, seconds)."""
    found: list[tuple[str, float | None]] = []
    while not stop.is_set():
        for service, operation in ORDINARY.items():
            started = time.monotonic()
            try:
                msg = await nc.request(subjects.rpc(service, operation), b"", timeout=DEADLINE_S)
                ok = json.loads(msg.data).get("ok") is True
                found.append((service, time.monotonic() - started if ok else None))
            except Exception:
                found.append((service, None))
        await asyncio.sleep(0.2)
    return found


async def _connections(stack: Stack) -> dict[str, int]:
    """nats-server's client id of each service's connection, by connection name."""
    async with httpx.AsyncClient() as http:
        found = (await http.get(f"{stack.nats.monitor_url}/connz?limit=1024")).json()
    return {c["name"]: c["cid"] for c in found["connections"] if c.get("name")}


async def _slow_consumers(stack: Stack) -> int:
    async with httpx.AsyncClient() as http:
        return int((await http.get(f"{stack.nats.monitor_url}/varz")).json()["slow_consumers"])


async def test_a_flood_of_maximum_and_oversize_requests_leaves_every_service_connected(
    stack: Stack,
) -> None:
    mallory = await signed_nats(
        stack.nats.url,
        principals.user("mallory"),
        name="flooder",
        **login_options("operator", stack.credentials.nats_password("operator")),
    )
    assert stack.nc is not None
    try:
        with pytest.raises(MaxPayloadError):  # refused before it leaves the client
            await mallory.request(subjects.rpc("projector", "history.search"), FAR_OVER)
        before, slow_before = await _connections(stack), await _slow_consumers(stack)
        stop = asyncio.Event()
        probing = asyncio.create_task(_probe(stack.nc, stop))
        flooded = await _flood(mallory)
        stop.set()
        probes = await probing
        after, slow_after = await _connections(stack), await _slow_consumers(stack)
    finally:
        await mallory.close()

    by_size: dict[str, Counter[str]] = {}
    for a in flooded:
        by_size.setdefault(f"{a.service}: {a.size}", Counter())[a.code] += 1
    slowest_probe = max((s for _, s in probes if s is not None), default=0.0)
    REPORT.add(
        f"request flood ({len(flooded)} requests of up to {LIMIT + 32 * 1024} bytes from one "
        f"user; {len(probes)} ordinary probes, slowest {slowest_probe:.2f} s)",
        table(
            ["service: size", "replies"],
            [[k, ", ".join(f"{c} x{n}" for c, n in sorted(v.items()))] for k, v in by_size.items()],
        ),
    )
    assert slow_after == slow_before, "nats-server dropped a slow consumer"
    services = {name: cid for name, cid in before.items() if name in stack.services}
    assert services, before
    assert {name: after.get(name) for name in services} == services, "a service reconnected"
    unanswered = [p for p in probes if p[1] is None]
    assert unanswered == [], f"ordinary requests unanswered within {DEADLINE_S} s"
    silent = [a for a in flooded if a.code.startswith(("NO REPLY", "NOT THE MODEL"))]
    assert silent == [], silent[:5]
    oversize = [a for a in flooded if a.size != "at the limit" and a.code != "unavailable"]
    assert {a.code for a in oversize} <= {"too_large"}, Counter(a.code for a in oversize)
    assert stack.unexpected_exits() == []
