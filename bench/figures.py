"""Project figures, each measured beside the raw baseline it is judged against."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import nats

from bench.baselines import publish_pipelined
from bench.cluster import led
from bench.registry import Env, Result, figure
from tavern_events import streams
from tavern_events.ids import new_id
from tavern_events.step import StepStarted
from tavern_events.union import encode
from tavern_runtime.provision import provision
from tavern_runtime.sessionlog import SessionLogReader, SessionLogWriter


def steps(n: int, session_id: str) -> list[StepStarted]:
    """`n` small session events (about 220 bytes encoded, like the 200-byte raw payload)."""
    now = datetime.now(UTC)
    return [
        StepStarted(id=new_id(), session_id=session_id, ts=now, turn=1, step=i) for i in range(n)
    ]


@figure(
    "sessionlog_append",
    baseline="publish_awaited",
    servers=("fsync", "default", "cluster"),
    count=3000,
    goal=0.7,
    description="SessionLogWriter.append, one event per append, awaited (conditional + dedup)",
)
async def sessionlog_append(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url, name="bench")
    try:
        specs = [streams.SESSIONS]
        await provision(nc.jetstream(), stream_specs=specs, buckets=(), replicas=env.replicas)
        await led(nc.jetstream(), streams.SESSIONS.name)
        writer = SessionLogWriter(nc, replicas=env.replicas)
        warmup, session = new_id(), new_id()
        for i, event in enumerate(steps(200, warmup)):
            await writer.append(warmup, [event], expected_last=i)
        events = steps(n, session)
        started = time.perf_counter()
        for i, event in enumerate(events):
            await writer.append(session, [event], expected_last=i)
        return Result(n, time.perf_counter() - started)
    finally:
        await nc.close()


@figure(
    "sessionlog_replay",
    baseline="replay_ordered",
    servers=("default",),
    count=20000,
    description="SessionLogReader.session: ordered replay of one session, decoded and validated",
)
async def sessionlog_replay(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url, name="bench")
    try:
        js = nc.jetstream(timeout=30)
        await provision(js, stream_specs=[streams.SESSIONS], buckets=())
        session = new_id()
        events = steps(n, session)
        bodies = [encode(e.model_copy(update={"seq": i + 1})) for i, e in enumerate(events)]
        await publish_pipelined(js, f"tavern.session.{session}.step.start", bodies)
        started = time.perf_counter()
        seen = len(await SessionLogReader(js).events(session))
        return Result(seen, time.perf_counter() - started)
    finally:
        await nc.close()
