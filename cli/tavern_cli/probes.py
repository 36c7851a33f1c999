"""What `tavern status` (and `tavern up`'s readiness note) asks the running system.

Each probe returns plain rows with an `ok` flag and a human detail; rendering is elsewhere.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field

import asyncpg
import httpx
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import ConsumerInfo
from nats.js.errors import NotFoundError

from tavern_cli import catalog
from tavern_cli.rundir import Layout, read_health
from tavern_events import streams, subjects
from tavern_runtime import pg
from tavern_runtime.provision import BUCKETS, CONSUMER_FIELDS, ConsumerSpec, Drift, compare

TIMEOUT_S = 3.0
PING_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class StreamRow:
    name: str
    ok: bool
    messages: int = 0
    bytes: int = 0
    consumers: int = 0
    detail: str = ""


@dataclass(frozen=True)
class ConsumerRow:
    stream: str
    name: str
    pending: int
    ack_pending: int
    redelivered: int
    waiting: int
    ok: bool = True
    detail: str = ""
    """Why a durable is red: missing, or its config differs from its spec (drift)."""


@dataclass(frozen=True)
class ServiceRow:
    name: str
    ok: bool
    ping: str
    ready: str


@dataclass
class NatsState:
    server: Check
    streams: list[StreamRow] = field(default_factory=list)
    consumers: list[ConsumerRow] = field(default_factory=list)


def expected_streams() -> list[str]:
    """The contract's streams and the backing streams of the KV buckets."""
    return [s.name for s in streams.ALL] + [b.stream_name for b in BUCKETS]


async def probe_nats(nc: Client) -> NatsState:
    js = nc.jetstream(timeout=TIMEOUT_S)
    try:
        account = await js.account_info()
    except Exception as exc:  # reported as a red row
        return NatsState(Check("NATS", False, f"connected, but JetStream: {_reason(exc)}"))
    v = nc.connected_server_version
    detail = f"v{v.major}.{v.minor}.{v.patch}, JetStream on, {account.streams} streams"
    state = NatsState(Check("NATS", True, f"{_url(nc)} ({detail})"))
    durables = {(c.stream, c.name): c for c in catalog.all_consumers()}
    for name in expected_streams():
        row, consumers = await _stream(js, name, durables)
        state.streams.append(row)
        state.consumers.extend(consumers)
    return state


async def _stream(
    js: JetStreamContext, name: str, durables: dict[tuple[str, str], ConsumerSpec]
) -> tuple[StreamRow, list[ConsumerRow]]:
    try:
        info = await js.stream_info(name)
        consumers = await js.consumers_info(name)
    except NotFoundError:
        return StreamRow(name, False, detail="missing: run `tavern init`"), []
    state = info.state
    row = StreamRow(name, True, state.messages, state.bytes, state.consumer_count or 0)
    rows = [_consumer_row(name, c, durables.get((name, c.name))) for c in consumers]
    found = {c.name for c in consumers}
    missing = [spec for (stream, n), spec in durables.items() if stream == name and n not in found]
    rows += [
        ConsumerRow(name, s.name, 0, 0, 0, 0, False, "missing: run `tavern init`") for s in missing
    ]
    return row, rows


def _consumer_row(stream: str, info: ConsumerInfo, spec: ConsumerSpec | None) -> ConsumerRow:
    """A durable of the catalog is red when its live config differs from its spec: something
    rewrote it, and it may be passing over what its reader needs."""
    drifts = durable_drift(spec, info) if spec is not None else []
    return ConsumerRow(
        stream,
        info.name,
        info.num_pending or 0,
        info.num_ack_pending or 0,
        info.num_redelivered or 0,
        info.num_waiting or 0,
        not drifts,
        _drift_note(drifts),
    )


def durable_drift(spec: ConsumerSpec, info: ConsumerInfo) -> list[Drift]:
    resource = f"consumer {spec.stream}/{spec.name}"
    return compare(resource, CONSUMER_FIELDS, spec.config(), info.config)


def _drift_note(drifts: list[Drift]) -> str:
    if not drifts:
        return ""
    changed = ", ".join(f"{d.field} {d.actual!r} (spec {d.expected!r})" for d in drifts)
    return f"changed: {changed}; `tavern init --apply-drift` repairs and replays it"


async def probe_postgres(database_url: str) -> Check:
    if not database_url:
        return Check("Postgres", False, "not configured (TAVERN_DATABASE_URL is empty)")
    where = pg.describe_dsn(database_url)
    try:
        conn = await asyncpg.connect(database_url, timeout=TIMEOUT_S)
        try:
            version = await conn.fetchval("SHOW server_version")
            vector = await conn.fetchval(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            )
        finally:
            await conn.close()
    except Exception as exc:  # reported as a red row
        return Check("Postgres", False, f"{where}: {pg.redact(_reason(exc), database_url)}")
    semantic = (
        f"pgvector {vector}: semantic channel available"
        if vector
        else "no vector extension: semantic channel off (tavern init creates it)"
    )
    return Check("Postgres", True, f"{where} (PostgreSQL {version}); {semantic}")


async def probe_services(layout: Layout, nc: Client | None) -> list[ServiceRow]:
    return list(await asyncio.gather(*(_service(layout, s.name, nc) for s in catalog.ALL)))


async def _service(layout: Layout, name: str, nc: Client | None) -> ServiceRow:
    ping_ok, ping = await ping_service(nc, name) if nc else (False, "no NATS")
    record = read_health(layout, name)
    if record is None:  # it may run elsewhere (compose, k8s): the ping decides
        return ServiceRow(name, ping_ok, ping, "no health file on this data dir")
    ready_ok, ready = await readiness(str(record["url"]))
    return ServiceRow(name, ping_ok and ready_ok, ping, ready)


async def ping_service(nc: Client, name: str) -> tuple[bool, str]:
    """`tavern.rpc.<name>.ping` over the bus."""
    try:
        reply = await nc.request(subjects.rpc(name, "ping"), b"", timeout=PING_TIMEOUT_S)
        body = json.loads(reply.data)
    except Exception as exc:  # no responder, timeout, bad reply: all red
        return False, _reason(exc)
    return bool(body.get("ok")), f"v{body.get('version', '?')}"


async def readiness(url: str) -> tuple[bool, str]:
    """GET `<url>/readyz`: (ready, short reason)."""
    try:
        async with httpx.AsyncClient(timeout=TIMEOUT_S) as client:
            response = await client.get(f"{url}/readyz")
        body = response.json()
    except Exception as exc:  # unreachable endpoint is a red row
        return False, f"{url}: {_reason(exc)}"
    if response.status_code == 200:
        return True, f"ready ({url})"
    failing = {k: v for k, v in (body.get("checks") or {}).items() if v != "ok"}
    reasons = "; ".join(f"{k}: {v}" for k, v in failing.items()) or str(body.get("status"))
    return False, f"not ready: {reasons}"


async def all_ready(layout: Layout) -> bool:
    """Every service has a live health file and answers `/readyz` with 200."""
    for entry in catalog.ALL:
        record = read_health(layout, entry.name)
        if record is None or not (await readiness(str(record["url"])))[0]:
            return False
    return True


def _url(nc: Client) -> str:
    url = nc.connected_url
    return f"nats://{url.hostname}:{url.port}" if url else "nats"


def _reason(exc: BaseException) -> str:
    text = str(exc).removeprefix("nats: ")
    return text or type(exc).__name__
