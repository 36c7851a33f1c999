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
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import pytest
from nats.errors import MaxPayloadError

from tavern_events import subjects
from tavern_runtime import principals
from tavern_runtime.bus import login_options
from tests.reliability.flooder import LIMIT, Answer, padded
from tests.reliability.report import REPORT, table
from tests.reliability.stack import Stack
from tests.support import signed_nats

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEADLINE_S = 5.0
"""What an ordinary caller waits (the loop's tools wait 5 s for the ledger and projector)."""
FLOOD_TIMEOUT_S = 300.0
ORDINARY = ("ledger", "projector", "consolidator", "loop")
"""Services asked `ping` throughout the flood."""


async def _flood(stack: Stack) -> list[Answer]:
    """The flooder's answers: a process of its own, a user on its own connection."""
    flooder = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.reliability.flooder",
        stack.nats.url,
        stack.credentials.nats_password("operator"),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(flooder.communicate(), FLOOD_TIMEOUT_S)
    assert flooder.returncode == 0
    return [Answer(**json.loads(line)) for line in out.decode().splitlines() if line.strip()]


async def _probe(nc: Any, stop: asyncio.Event) -> list[tuple[str, float | None]]:
    """Ordinary questions to every service, every 0.2 s, until `stop`: (service, seconds)."""
    found: list[tuple[str, float | None]] = []
    while not stop.is_set():
        for service in ORDINARY:
            started = time.monotonic()
            try:
                msg = await nc.request(subjects.rpc(service, "ping"), b"", timeout=DEADLINE_S)
                ok = json.loads(msg.data).get("ok") is True
                found.append((service, time.monotonic() - started if ok else None))
            except Exception:
                found.append((service, None))
        await asyncio.sleep(0.2)
    return found


def _latencies(probes: list[tuple[str, float | None]]) -> str:
    """Median and slowest answer per service, e.g. `ledger 0.01/1.20 s`."""
    shown = []
    for service in ORDINARY:
        took = sorted(s for name, s in probes if name == service and s is not None)
        if took:
            shown.append(f"{service} {took[len(took) // 2]:.2f}/{took[-1]:.2f} s")
    return ", ".join(shown)


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
            await mallory.request(
                subjects.rpc("projector", "history.search"), padded(5 * 1024 * 1024)
            )
        before, slow_before = await _connections(stack), await _slow_consumers(stack)
        stop = asyncio.Event()
        probing = asyncio.create_task(_probe(stack.nc, stop))
        flooded = await _flood(stack)
        stop.set()
        probes = await probing
        after, slow_after = await _connections(stack), await _slow_consumers(stack)
    finally:
        await mallory.close()

    by_size: dict[str, Counter[str]] = {}
    for a in flooded:
        by_size.setdefault(f"{a.service}: {a.size}", Counter())[a.code] += 1
    REPORT.add(
        f"request flood ({len(flooded)} requests of up to {LIMIT + 32 * 1024} bytes from one "
        f"user; {len(probes)} ordinary pings: {_latencies(probes)})",
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
