"""Loop figures: the overhead of one turn with the offline model, and a fleet of sessions.

Both run the real loop code against a fresh nats-server; only the model is the deterministic
offline stand-in, so what is measured is the loop's own machinery and the bus.
"""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime
from typing import Any

import nats
import nats.errors
from pydantic import SecretStr

from bench.cluster import led
from bench.ledger import BENCH_KEY
from bench.registry import Env, Limits, Result, figure
from tavern_events import subjects
from tavern_events.ids import new_id
from tavern_events.input import MessageInput, MessageInputPayload
from tavern_events.union import encode
from tavern_llm.offline import OfflineProvider
from tavern_llm.router import ProviderRouter
from tavern_loop.dispatch import dispatch_consumer
from tavern_loop.engine import EngineParts, LoopEngine
from tavern_loop.inputs import Arrivals, pending_inputs
from tavern_loop.options import LoopOptions
from tavern_loop.sessionlog import HeldLog
from tavern_loop.tools.base import Tool, ToolContext, ToolOutput, ToolRegistry, ToolSpec
from tavern_loop.tools.pipeline import ToolPipeline
from tavern_loop.turn import LoopDeps, TurnRunner
from tavern_runtime import principals
from tavern_runtime.auth import Credentials
from tavern_runtime.provision import provision
from tavern_runtime.sessionlog import SessionLogWriter
from tavern_runtime.settings import TavernSettings

ONE_TOOL_TURN = 'call echo with {"n": 1}'
FLEET_SESSIONS = 200


async def _echo(args: Any, ctx: ToolContext) -> ToolOutput:
    return ToolOutput(content=json.dumps(args))


ECHO = Tool(ToolSpec("echo", "Echo the arguments.", {"type": "object"}, parallel_safe=True), _echo)


def _router() -> ProviderRouter:
    offline = "offline:offline-1"
    return ProviderRouter(
        {"offline": OfflineProvider()}, {"chat": [offline], "summarise": [offline]}
    )


def _message(session_id: str, text: str) -> MessageInput:
    return MessageInput(
        input_id=new_id(),
        session_id=session_id,
        ts=datetime.now(UTC),
        payload=MessageInputPayload(text=text),
    )


BENCH_CREDENTIALS = Credentials(BENCH_KEY.encode())
"""The turns are the operator's, signed with the bench's key and checked as the loop checks every
input (the fleet's engine is given the same key, as `tavern up` gives every service its own)."""


SEND_ATTEMPTS = 3


async def _send(js: Any, message: MessageInput) -> None:
    """Publish an input as a client does: when its ack does not come in time (on a fresh
    cluster, a stream leader being elected), send it again with the same id, which the stream
    keeps once. Each retry is printed beside the figure."""
    subject = subjects.session_input(message.session_id, "message")
    headers = BENCH_CREDENTIALS.headers(principals.OPERATOR, **{"Nats-Msg-Id": message.input_id})
    for attempt in range(1, SEND_ATTEMPTS + 1):
        try:
            await js.publish(subject, encode(message), headers=headers)
            return
        except nats.errors.TimeoutError:
            if attempt == SEND_ATTEMPTS:
                raise
            print(f"    input {message.input_id}: no ack, sent again ({attempt})", flush=True)


@figure(
    "loop_turn",
    baseline="publish_awaited",
    servers=("fsync", "default", "cluster"),
    count=200,
    description="one turn with the offline model and 1 tool call (2 steps, 16 events, appended "
    "conditionally: pipelined on R1, in atomic batches on R3), timed per turn, 200 turns in one "
    "session",
    limits=Limits(p50_ms=10, p99_ms=30),
)
async def loop_turn(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url, name="bench-loop")
    try:
        js = nc.jetstream(timeout=10)
        await provision(js, replicas=env.replicas)
        await led(js, "SESSIONS", "INPUTS")
        options = LoopOptions(recall=False)
        deps = LoopDeps(
            _router(),
            ToolPipeline(ToolRegistry([ECHO])),
            js,
            _no_rpc,
            options,
            lambda: datetime.now(UTC),
            new_id,
            credentials=BENCH_CREDENTIALS,
        )
        session = f"bench-{new_id()[-12:]}"
        held = HeldLog(session, SessionLogWriter(nc, replicas=env.replicas), [])
        arrivals = Arrivals()  # the session runner's live view of its inputs

        async def noted(msg: Any) -> None:
            arrivals.note(msg)

        await nc.subscribe(subjects.input_filter(session), cb=noted)
        latencies: list[float] = []
        started = time.perf_counter()
        for _ in range(n):
            await _send(js, _message(session, ONE_TOOL_TURN))
            found = await pending_inputs(js, session, held.state.input_cursor, leader=True)
            t0 = time.perf_counter()
            pending = [p.authenticated(BENCH_CREDENTIALS) for p in found]
            ended = await TurnRunner(held, deps, asyncio.Event(), arrivals=arrivals).run(pending)
            latencies.append((time.perf_counter() - t0) * 1000)
            assert ended.payload.outcome == "completed"
            assert ended.payload.steps == 2
        return Result(n, time.perf_counter() - started, tuple(latencies))
    finally:
        await nc.close()


async def _no_rpc(
    subject: str, payload: dict[str, Any], timeout: float, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    return {"error": {"code": "unavailable", "message": subject}}


@figure(
    "loop_fleet",
    baseline="publish_pipelined",
    servers=("fsync",),
    count=600,
    goal=0.5,
    description=f"{FLEET_SESSIONS} concurrent sessions through dispatch, leases and runners; "
    "rate = session events appended per second",
)
async def loop_fleet(env: Env, n: int) -> Result:
    nc = await nats.connect(env.nats_url, name="bench-fleet")
    settings = TavernSettings(
        nats_url=env.nats_url, data_dir=env.directory("loop"), auth_key=SecretStr(BENCH_KEY)
    )
    engine = LoopEngine(settings, EngineParts(LoopOptions(recall=False), _router(), [ECHO]))
    try:
        js = nc.jetstream(timeout=30)
        await provision(js, consumers=[dispatch_consumer()])
        await engine.start()
        fleet = min(FLEET_SESSIONS, n)  # a smoke run's few turns: one each, fewer sessions
        sessions = [f"fleet-{i}-{new_id()[-8:]}" for i in range(fleet)]
        turns = max(1, n // fleet)
        ended = {s: asyncio.Queue[int]() for s in sessions}

        async def on_turn_end(msg: Any) -> None:
            ended[msg.subject.split(".")[2]].put_nowait(json.loads(msg.data)["seq"])

        sub = await nc.subscribe("tavern.session.*.turn.end", cb=on_turn_end)
        started = time.perf_counter()
        counts = await asyncio.gather(*(_converse(js, s, turns, ended[s]) for s in sessions))
        elapsed = time.perf_counter() - started
        await sub.unsubscribe()
        return Result(sum(counts), elapsed)
    finally:
        await engine.stop(grace_s=5)
        await nc.close()


async def _converse(js: Any, session_id: str, turns: int, ended: asyncio.Queue[int]) -> int:
    """Say something, wait for its turn/end, repeat; the events the session logged."""
    appended = 0
    for turn in range(1, turns + 1):
        await _send(js, _message(session_id, f"hello {turn}"))
        appended = await asyncio.wait_for(ended.get(), 120)
    return appended
