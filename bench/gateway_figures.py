"""The gateway's server-sent events: the latency it adds between an event stored in SESSIONS and
the event delivered to a streaming HTTP client, beside a raw nats-py subscriber of the same
events in the same run; and 200 concurrent streaming clients held without loss.

The gateway runs as its own process (`python -m bench.gateway_figures PORT NATS_URL`) with the
shipped SSE route, ordered consumer and uvicorn; the one thing it changes, loudly: the signed-in
account is given (no Postgres lookup of the session cookie, which happens once per connection,
not per event).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import nats

from bench.registry import Env, Limits, Result, baseline, figure
from tavern_events import subjects
from tavern_events.ids import new_id
from tavern_events.session import SessionCreated, SessionCreatedPayload
from tavern_events.streams import SESSIONS
from tavern_events.union import encode
from tavern_runtime.provision import provision

BENCH_KEY = "bench-gateway-auth-key-0123456789abcdef"
OWNER = "bench"
PAYLOAD_BYTES = 1024
"""About a `user/message` or `assistant/chunk` event as the loop stores it."""
FANOUT_CLIENTS = 200
STARTUP_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def _gateway(nats_url: str) -> AsyncIterator[str]:
    port = _free_port()
    env = {**os.environ, "TAVERN_AUTH_KEY": BENCH_KEY, "TAVERN_LOG_LEVEL": "WARNING"}
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.gateway_figures", str(port), nats_url, env=env
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_S
        async with httpx.AsyncClient() as http:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"{url}/openapi.json")).status_code == 200:
                        break
                if time.monotonic() > deadline or process.returncode is not None:
                    raise RuntimeError("the bench gateway did not start")
                await asyncio.sleep(0.1)
        yield url
    finally:
        process.terminate()
        await process.wait()


async def _session(js: Any) -> str:
    session_id = f"bench-{new_id()[-12:].lower()}"
    created = SessionCreated(
        id=new_id(),
        session_id=session_id,
        seq=1,
        ts=datetime.now(UTC),
        payload=SessionCreatedPayload(
            architecture="agent-tavern", context_mode="dsh-native", chat_id=session_id, owner=OWNER
        ),
    )
    await js.publish(subjects.session_event(session_id, created.type), encode(created))
    return session_id


def _event(session_id: str, i: int) -> bytes:
    body = {"type": "bench/event", "session_id": session_id, "i": i, "pad": "x" * PAYLOAD_BYTES}
    return json.dumps(body).encode()


async def _sse_client(
    url: str, session_id: str, received: dict[int, float], ready: asyncio.Event, want: int
) -> None:
    """Follow the session's events; note when each bench event arrives."""
    async with (
        httpx.AsyncClient(timeout=None) as http,
        http.stream("GET", f"{url}/api/sessions/{session_id}/events") as stream,
    ):
        assert stream.status_code == 200, stream.status_code
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                event = json.loads(line[6:])
                if event.get("type") == "session/created":
                    ready.set()
                elif event.get("type") == "bench/event":
                    received[int(event["i"])] = time.perf_counter()
                    if len(received) >= want:
                        return


async def _raw_client(
    nc: Any, session_id: str, received: dict[int, float], ready: asyncio.Event
) -> Any:
    async def on(msg: Any) -> None:
        event = json.loads(msg.data)
        if event.get("type") == "session/created":
            ready.set()
        elif event.get("type") == "bench/event":
            received[int(event["i"])] = time.perf_counter()

    return await nc.jetstream().subscribe(
        subjects.session_filter(session_id), stream=SESSIONS.name, ordered_consumer=True, cb=on
    )


async def _publish_paced(js: Any, session_id: str, n: int, gap_s: float) -> dict[int, float]:
    """Store `n` events one by one (each awaited, then a pause): latencies, not throughput."""
    sent: dict[int, float] = {}
    subject = subjects.session_event(session_id, "user/message")
    for i in range(n):
        sent[i] = time.perf_counter()
        await js.publish(subject, _event(session_id, i), stream=SESSIONS.name)
        await asyncio.sleep(gap_s)
    return sent


@baseline(
    "session_follow_raw",
    servers=("fsync",),
    count=500,
    description="a raw nats-py ordered consumer of one session's subjects: publish to receipt, "
    "1 KB events, one at a time",
)
async def session_follow_raw(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url, name="bench-follow")
    try:
        js = nc.jetstream(timeout=10)
        await provision(js, replicas=env.replicas)
        session_id = await _session(js)
        received: dict[int, float] = {}
        ready = asyncio.Event()
        sub = await _raw_client(nc, session_id, received, ready)
        await asyncio.wait_for(ready.wait(), 10)
        started = time.perf_counter()
        sent = await _publish_paced(js, session_id, n, 0.002)
        while len(received) < n:  # noqa: ASYNC110 - the callback counts; a sleep is enough
            await asyncio.sleep(0.01)
        await sub.unsubscribe()
        latencies = tuple((received[i] - sent[i]) * 1000 for i in range(n))
        return Result(n, time.perf_counter() - started, latencies)
    finally:
        await nc.close()


@figure(
    "gateway_sse_added",
    baseline="session_follow_raw",
    servers=("fsync",),
    count=500,
    description="latency the gateway adds: each event's arrival at a streaming SSE client over "
    "HTTP minus its arrival at a raw nats-py subscriber of the same events in the same run "
    "(gateway in its own process; the signed-in account given, no cookie lookup)",
    limits=Limits(p50_ms=5, p99_ms=20),
)
async def gateway_sse_added(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url, name="bench-sse")
    try:
        js = nc.jetstream(timeout=10)
        await provision(js, replicas=env.replicas)
        session_id = await _session(js)
        async with _gateway(env.nats_url) as url:
            raw: dict[int, float] = {}
            sse: dict[int, float] = {}
            raw_ready, sse_ready = asyncio.Event(), asyncio.Event()
            sub = await _raw_client(nc, session_id, raw, raw_ready)
            client = asyncio.create_task(_sse_client(url, session_id, sse, sse_ready, n))
            await asyncio.wait_for(asyncio.gather(raw_ready.wait(), sse_ready.wait()), 15)
            started = time.perf_counter()
            await _publish_paced(js, session_id, n, 0.002)
            await asyncio.wait_for(client, 30)
            await sub.unsubscribe()
        assert sorted(sse) == list(range(n)), f"the SSE client lost {n - len(sse)} events"
        added = tuple(max(0.0, (sse[i] - raw[i]) * 1000) for i in range(n))
        return Result(n, time.perf_counter() - started, added)
    finally:
        await nc.close()


@figure(
    "gateway_sse_fanout",
    baseline="session_follow_raw",
    servers=("fsync",),
    count=100,
    description=f"{FANOUT_CLIENTS} concurrent SSE clients of one gateway process following one "
    "session: every event reaches every client (no loss); latencies: publish to the last "
    "client's receipt",
)
async def gateway_sse_fanout(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url, name="bench-fanout")
    try:
        js = nc.jetstream(timeout=10)
        await provision(js, replicas=env.replicas)
        session_id = await _session(js)
        async with _gateway(env.nats_url) as url:
            seen = [dict[int, float]() for _ in range(FANOUT_CLIENTS)]
            readies = [asyncio.Event() for _ in range(FANOUT_CLIENTS)]
            clients = [
                asyncio.create_task(_sse_client(url, session_id, seen[k], readies[k], n))
                for k in range(FANOUT_CLIENTS)
            ]
            await asyncio.wait_for(asyncio.gather(*(r.wait() for r in readies)), 60)
            started = time.perf_counter()
            sent = await _publish_paced(js, session_id, n, 0.01)
            await asyncio.wait_for(asyncio.gather(*clients), 60)
        lost = sum(n - len(s) for s in seen)
        assert lost == 0, f"{lost} events lost across {FANOUT_CLIENTS} clients"
        latencies = tuple((max(s[i] for s in seen) - sent[i]) * 1000 for i in range(n))
        return Result(n * FANOUT_CLIENTS, time.perf_counter() - started, latencies)
    finally:
        await nc.close()


# --- the bench gateway process ------------------------------------------------------------------


def _serve(port: int, nats_url: str) -> None:
    import uvicorn
    from fastapi import FastAPI

    from tavern_gateway import web
    from tavern_gateway.accounts import Account
    from tavern_gateway.bus import Bus
    from tavern_gateway.config import GatewaySettings
    from tavern_runtime.auth import Credentials

    settings = GatewaySettings(nats_url=nats_url)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        nc = await nats.connect(nats_url, name="bench-gateway")
        bus = Bus(nc, Credentials(BENCH_KEY.encode()), settings.gateway_rpc_timeout_s)
        app.state.gateway = web.Gateway(settings, None, bus)  # type: ignore[arg-type]
        yield
        await nc.close()

    app = FastAPI(lifespan=lifespan)
    app.include_router(web.api)
    app.dependency_overrides[web.user] = lambda: Account(OWNER, OWNER, "user")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


if __name__ == "__main__":
    _serve(int(sys.argv[1]), sys.argv[2])
