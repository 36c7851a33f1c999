"""Raw baselines: plain nats-py and asyncpg, no project code (method: research/bus.md §3)."""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from multiprocessing.synchronize import Event as ProcessEvent

import asyncpg
import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig
from nats.js.errors import NoStreamResponseError

from bench.cluster import led
from bench.registry import Env, Result, baseline, figure

WINDOW = 256
WARMUP = 200
RPC_SUBJECT = "bench.rpc.echo"


def payload(i: int = 0) -> bytes:
    """A 200-byte JSON event body."""
    data = {"note": ""}
    body = {"id": str(uuid.UUID(int=i)), "type": "bench/event", "seq": i, "data": data}
    data["note"] = "x" * (200 - len(json.dumps(body)))
    return json.dumps(body).encode()


PAYLOAD = payload()


async def reachable(js: JetStreamContext, subject: str, timeout: float = 30.0) -> None:
    """Publish one warm-up message once the subject's interest has crossed the cluster's routes.

    A replicated stream can have its leader and current replicas a moment before the server the
    client talks to knows where its subjects go; a publish then meets no responders.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            await js.publish(subject, PAYLOAD)
            return
        except (NoRespondersError, NoStreamResponseError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


CREATE_ATTEMPTS = 3
"""A cluster that has just elected its meta leader may still be settling its routes: the reply
to a stream's creation can be lost on a route closed as a duplicate (seen: the stream made,
its leader elected, no reply within 30 s)."""


async def created(
    js: JetStreamContext, config: StreamConfig, attempts: int = CREATE_ATTEMPTS
) -> None:
    """Create the stream, asking again when no reply comes: the same config again is a no-op
    once the stream exists."""
    for attempt in range(1, attempts + 1):
        try:
            await js.add_stream(config)
            return
        except NatsTimeout:
            if attempt == attempts:
                raise
            print(f"    no reply creating stream {config.name}: asking again", flush=True)


@asynccontextmanager
async def bench_stream(
    url: str, replicas: int = 1
) -> AsyncIterator[tuple[Client, JetStreamContext]]:
    nc = await nats.connect(url, name="bench")
    js = nc.jetstream(timeout=30)
    config = StreamConfig(
        name="BENCH",
        subjects=["bench.>"],
        storage=StorageType.FILE,
        duplicate_window=120,
        num_replicas=replicas,
    )
    await created(js, config)
    await led(js, "BENCH")
    await reachable(js, "bench.warm")
    try:
        yield nc, js
    finally:
        await nc.close()


async def publish_pipelined(js: JetStreamContext, subject: str, bodies: list[bytes]) -> None:
    """`publish_async` in windows; futures never resolve on a server error, hence wait_for."""
    for start in range(0, len(bodies), WINDOW):
        futures = [await js.publish_async(subject, b) for b in bodies[start : start + WINDOW]]
        await asyncio.wait_for(asyncio.gather(*futures), timeout=30)


@baseline(
    "publish_awaited",
    servers=("fsync", "default", "cluster"),
    count=3000,
    description="nats-py `await js.publish` per message (200 B)",
)
async def publish_awaited(env: Env, n: int) -> Result:
    async with bench_stream(env.nats_url, env.replicas) as (_, js):
        for _ in range(WARMUP):
            await js.publish("bench.warm", PAYLOAD)
        started = time.perf_counter()
        for _ in range(n):
            await js.publish("bench.e", PAYLOAD)
        return Result(n, time.perf_counter() - started)


@figure(
    "publish_guarded",
    baseline="publish_awaited",
    servers=("fsync", "default"),
    count=3000,
    description="raw nats-py with the writer's headers (msg id + wildcard OCC): protocol cost",
)
async def publish_guarded(env: Env, n: int) -> Result:
    async with bench_stream(env.nats_url) as (_, js):
        for _ in range(WARMUP):
            await js.publish("bench.warm", PAYLOAD, headers={"Nats-Msg-Id": str(uuid.uuid4())})
        last = 0
        started = time.perf_counter()
        for i in range(n):
            headers = {
                "Nats-Msg-Id": f"e-{i}",
                "Nats-Expected-Last-Subject-Sequence": str(last),
                "Nats-Expected-Last-Subject-Sequence-Subject": "bench.s1.>",
            }
            last = (await js.publish("bench.s1.e", PAYLOAD, headers=headers)).seq
        return Result(n, time.perf_counter() - started)


@baseline(
    "publish_pipelined",
    servers=("fsync", "default"),
    count=15000,
    description="nats-py `publish_async`, windows of 256 awaited with wait_for",
)
async def publish_pipelined_bench(env: Env, n: int) -> Result:
    async with bench_stream(env.nats_url) as (_, js):
        await publish_pipelined(js, "bench.warm", [PAYLOAD] * WARMUP)
        started = time.perf_counter()
        await publish_pipelined(js, "bench.e", [PAYLOAD] * n)
        return Result(n, time.perf_counter() - started)


@baseline(
    "consume_pull",
    servers=("default",),
    count=30000,
    description="nats-py durable pull consumer, fetch(256) + ack each",
)
async def consume_pull(env: Env, n: int) -> Result:
    async with bench_stream(env.nats_url) as (_, js):
        await publish_pipelined(js, "bench.e", [PAYLOAD] * n)
        config = ConsumerConfig(
            durable_name="bench", ack_policy=AckPolicy.EXPLICIT, max_ack_pending=20000
        )
        await js.add_consumer("BENCH", config)
        sub = await js.pull_subscribe_bind("bench", stream="BENCH")
        started, seen = time.perf_counter(), 0
        while seen < n:
            for msg in await sub.fetch(WINDOW, timeout=5):
                await msg.ack()
                seen += 1
        elapsed = time.perf_counter() - started
        await sub.unsubscribe()
        return Result(seen, elapsed)


@baseline(
    "replay_ordered",
    servers=("default",),
    count=20000,
    description="nats-py ordered consumer over one subject filter, no decoding",
)
async def replay_ordered(env: Env, n: int) -> Result:
    async with bench_stream(env.nats_url) as (_, js):
        await publish_pipelined(js, "bench.s1.e", [PAYLOAD] * n)
        started, seen = time.perf_counter(), 0
        sub = await js.subscribe("bench.s1.>", ordered_consumer=True)
        while True:
            msg = await sub.next_msg(timeout=5)
            seen += 1
            if msg.metadata.num_pending == 0:
                break
        elapsed = time.perf_counter() - started
        await sub.unsubscribe()
        return Result(seen, elapsed)


def _responder(url: str, ready: ProcessEvent) -> None:
    async def serve() -> None:
        nc = await nats.connect(url, name="bench-responder")

        async def echo(msg: Msg) -> None:
            await msg.respond(msg.data)

        await nc.subscribe(RPC_SUBJECT, cb=echo)
        await nc.flush()
        ready.set()
        await asyncio.Event().wait()

    asyncio.run(serve())


@baseline(
    "request_reply",
    servers=("default",),
    count=3000,
    description="core NATS request/reply, responder in another process, sequential",
)
async def request_reply(env: Env, n: int) -> Result:
    context = multiprocessing.get_context("spawn")
    ready = context.Event()
    responder = context.Process(target=_responder, args=(env.nats_url, ready), daemon=True)
    responder.start()
    try:
        if not await asyncio.to_thread(ready.wait, 30):
            raise RuntimeError("responder did not start")
        return await _requests(env.nats_url, n)
    finally:
        responder.terminate()
        responder.join(5)


async def _requests(url: str, n: int) -> Result:
    nc = await nats.connect(url, name="bench-requester")
    try:
        for _ in range(WARMUP):
            await nc.request(RPC_SUBJECT, PAYLOAD, timeout=2)
        latencies = []
        started = time.perf_counter()
        for _ in range(n):
            sent = time.perf_counter()
            await nc.request(RPC_SUBJECT, PAYLOAD, timeout=2)
            latencies.append((time.perf_counter() - sent) * 1000)
        return Result(n, time.perf_counter() - started, tuple(latencies))
    finally:
        await nc.close()


@baseline(
    "pg_executemany",
    servers=("postgres",),
    count=50000,
    description="asyncpg executemany, 1000 rows per transaction (event-store table)",
)
async def pg_executemany(env: Env, n: int) -> Result:
    table = f"bench_events_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(env.database_url)
    try:
        await conn.execute(
            f"CREATE TABLE {table} (id bigserial PRIMARY KEY, stream_id text NOT NULL, "
            "version int NOT NULL, data jsonb NOT NULL, UNIQUE (stream_id, version))"
        )
        insert = f"INSERT INTO {table} (stream_id, version, data) VALUES ($1, $2, $3)"
        body = PAYLOAD.decode()
        rows = [(f"s-{i % 1000}", i, body) for i in range(n)]
        started = time.perf_counter()
        for start in range(0, n, 1000):
            async with conn.transaction():
                await conn.executemany(insert, rows[start : start + 1000])
        elapsed = time.perf_counter() - started
        await conn.execute(f"DROP TABLE {table}")
        return Result(n, elapsed)
    finally:
        await conn.close()
