"""Load through the whole stack: N concurrent sessions x M turns with the offline model, the four
services as separate processes (as `tavern up` runs them) on a fresh nats-server and PostgreSQL.

Reports turns/s, p50/p99 turn latency (input published -> its turn/end seen), the peak consumer
lag of every durable consumer and how long it took to drain after the load, the peak RSS of each
process, and what was lost or doubled (checked from the outside, as the reliability suite does).
Beside them, the per-turn cost sheet (`bench/costsheet.py`): CPU per process (while the turns
ran, and after them until every consumer caught up), messages and bytes
per stream and per NATS user, Postgres statements and WAL, consumer lag over time; the JSON
output keeps it. The raw baseline beside it sends the same traffic with plain nats-py (one
input and the turn's events appended per turn, no services): the bus cost of the same work.

    .venv/bin/python -m bench.run --only load            # 200 sessions x 20 turns
    .venv/bin/python -m bench.run --only load --count load=400 --count load_raw=400
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import nats

from bench.costsheet import (
    CostSheet,
    LagPoint,
    Meter,
    consumer_services,
    enable_statement_stats,
    sheet,
)
from bench.registry import Env, Result, baseline, figure
from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.streams import SESSIONS as SESSIONS_STREAM_SPEC
from tavern_events.tool import ToolCall, ToolResult
from tavern_runtime.settings import TavernSettings
from tests.reliability.driver import Driver
from tests.reliability.scenario import quiesce, verify
from tests.reliability.stack import Stack

SESSIONS = 200
SESSIONS_STREAM = SESSIONS_STREAM_SPEC.name
TURNS = 20
CHAT_TURN_EVENTS = 9
"""What a chat turn of the load appends to its session's log with the offline model: turn/start,
step/start, user/message, agent/request, assistant/chunk, assistant/message, step/end,
turn/stopping, turn/end."""
TOOL_TURN_EVENTS = 16
"""A turn with one tool call: the same, with tool/call and tool/result and a second step
(step/start, agent/request, assistant/chunk, assistant/message, step/end)."""
EVENT_BYTES = 520
"""About the mean size of the load's session events (9 KB a tool turn, 4.6 KB a chat turn)."""
INPUT_BYTES = 480
"""About the size of one of the load's inputs as the driver sends it."""
SAMPLE_EVERY_S = 0.5
MEMORY_EVERY_S = 5.0
"""Memory is read less often than lags: Postgres's share of it (PSS) walks the page tables of
the postmaster and every backend, and read every 0.5 s that took 1.6% of the machine's CPU
(perf) away from the stack being measured."""
DRAIN_TIMEOUT_S = 120.0
TURN_TIMEOUT_S = 60.0
"""A turn not over by then counts as stuck (and shows up as lost); the load goes on."""


def shape(n: int, sessions: int = SESSIONS) -> tuple[int, int]:
    """`n` turns as (sessions, turns each): 200 x 20 at the full size, fewer sessions below."""
    turns = min(TURNS, max(1, n // sessions)) if n >= sessions else max(1, min(TURNS, n // 2))
    return max(1, min(sessions, n // turns)), turns


def turn_kind(session: int, turn: int) -> int:
    """Which of the four turns `line` sends: each session goes round them, starting at its own
    place (as a fleet's conversations are not in step), so that at any moment about a quarter
    of the sessions chat, write a memory, write a variable or search."""
    return (session + turn) % 4


KINDS = ("chat", "memory write", "variable write", "memory search")
"""The load's turns by `turn_kind`."""


def line(session: int, turn: int) -> str:
    """Chat, a memory write, a variable write, a memory search: the whole stack each turn."""
    kind = turn_kind(session, turn)
    if kind == 1:
        return f"remember that load session {session} saw number {turn}"
    if kind == 2:
        return f'call variable_set with {{"scope": "chat", "name": "n{turn}", "value": {turn}}}'
    if kind == 3:
        return "search memory for number"
    return f"Hello from load session {session}, turn {turn}. How are you?"


def raw_events(session: int, turn: int) -> int:
    """The session events the raw baseline appends for `session`'s `turn`: what the offline
    turn of `line(session, turn)` appends, less what only some turns add (a recall message
    when memory is found, `session/created`), so the baseline never sends more than the load."""
    return CHAT_TURN_EVENTS if turn_kind(session, turn) == 0 else TOOL_TURN_EVENTS


def raw_events_per_turn(sessions: int, turns: int) -> float:
    per_session = (sum(raw_events(s, t) for t in range(turns)) for s in range(sessions))
    return sum(per_session) / (sessions * turns)


@dataclass
class Samples:
    lags: dict[str, int] = field(default_factory=dict)  # peak per consumer
    rss: dict[str, int] = field(default_factory=dict)  # peak per process
    timeline: list[LagPoint] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def add(self, lags: dict[str, int], rss: dict[str, int] | None = None) -> None:
        self.timeline.append(LagPoint(time.monotonic() - self.started, dict(lags)))
        for name, lag in lags.items():
            self.lags[name] = max(self.lags.get(name, 0), lag)
        for name, size in (rss or {}).items():
            self.rss[name] = max(self.rss.get(name, 0), size)


@dataclass
class LoadReport:
    sessions: int
    turns: int
    seconds: float
    latencies_ms: list[float]
    outcomes: dict[str, int]
    peaks: Samples
    drained_s: float | None
    lags_after: dict[str, int]
    rss_after: dict[str, int]
    cpu_s: dict[str, float]
    """CPU seconds each process spent while the load ran."""
    tools: dict[str, int]
    """Tool results by outcome: `ok`, or the error code the model was shown."""
    latency_before_ms: float
    latency_after_ms: float
    lost: list[str]
    doubled: list[str]
    problems: list[str]
    cost: CostSheet
    """What one turn cost each process, stream and the database (bench/costsheet.py)."""
    by_kind: dict[str, list[float]] = field(default_factory=dict)
    """The latencies of each kind of turn (`KINDS`): which of them make the tail."""
    tool_calls: list[ToolTimes] = field(default_factory=list)
    """Each tool call's time from its `tool/call` to its `tool/result`, and what the tool
    itself took: the rest is its turn's earlier appends and the call's own, made durable
    before the tool runs."""

    @property
    def turns_per_s(self) -> float:
        return len(self.latencies_ms) / self.seconds if self.seconds else 0.0

    @property
    def session_messages_per_turn(self) -> float:
        """SESSIONS messages stored a turn (the raw baseline appends at most as many)."""
        return self.cost.streams.get(SESSIONS_STREAM, (0.0, 0.0))[0]

    def percentile(self, p: float) -> float:
        return percentile(self.latencies_ms, p)

    def kinds_json(self) -> dict[str, dict[str, float]]:
        return {
            kind: {"p50": round(percentile(found, 50), 1), "p99": round(percentile(found, 99), 1)}
            for kind, found in self.by_kind.items()
            if found
        }

    def kind_lines(self) -> list[str]:
        return [
            "turn latency by kind: "
            + "; ".join(
                f"{kind} p50 {percentile(found, 50):.0f} ms, p99 {percentile(found, 99):.0f} ms"
                for kind, found in self.by_kind.items()
                if found
            )
        ]

    def lines(self) -> list[str]:
        out = [
            f"{self.sessions} sessions x {self.turns} turns: {len(self.latencies_ms)} turns in "
            f"{self.seconds:.1f} s = {self.turns_per_s:.1f} turns/s; outcomes {self.outcomes}",
            f"turn latency p50 {self.percentile(50):.0f} ms, p99 {self.percentile(99):.0f} ms; "
            f"idle probe p50 before {self.latency_before_ms:.0f} ms, after "
            f"{self.latency_after_ms:.0f} ms",
            *self.kind_lines(),
            *tool_lines(self.tool_calls),
            f"lost {len(self.lost)}, doubled {len(self.doubled)}, malformed {len(self.problems)}",
            "tool results: "
            + (", ".join(f"{k} {v}" for k, v in sorted(self.tools.items())) or "none"),
            "drained after the load in "
            + (f"{self.drained_s:.1f} s" if self.drained_s is not None else "NEVER"),
            f"session log messages a turn: {self.session_messages_per_turn:.2f} stored by this "
            f"load; {raw_events_per_turn(self.sessions, self.turns):.2f} appended by the raw "
            "baseline (load_raw) for the same turns",
            "",
            f"{'consumer':24} {'peak lag':>9} {'after':>6}",
        ]
        for name in sorted(self.peaks.lags):
            out.append(f"{name:24} {self.peaks.lags[name]:>9} {self.lags_after.get(name, -1):>6}")
        out += [
            "",
            f"{'process':14} {'peak MB':>8} {'after MB':>9} {'CPU s':>7} {'CPU/turn ms':>12}",
        ]
        turns = max(1, len(self.latencies_ms))
        for name in sorted(self.peaks.rss):
            peak, after = self.peaks.rss[name] / 2**20, self.rss_after.get(name, 0) / 2**20
            cpu = self.cpu_s.get(name, 0.0)
            out.append(
                f"{name:14} {peak:>8.0f} {after:>9.0f} {cpu:>7.1f} {cpu * 1000 / turns:>12.1f}"
            )
        return [*out, "", *self.cost.lines()]


def percentile(values: Sequence[float], p: float) -> float:
    ordered = sorted(values) or [0.0]
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


@dataclass(frozen=True)
class ToolTimes:
    between_ms: float
    """From the call's `tool/call` to its `tool/result` (the events' own times)."""
    ran_ms: int | None
    """What the tool took, as its result says (pre-execute checks and the body)."""


def tool_summary(calls: Sequence[ToolTimes]) -> dict[str, float]:
    """Tool calls' times as medians and 99th percentiles in ms ({} without calls)."""
    if not calls:
        return {}
    between = [t.between_ms for t in calls]
    ran = [float(t.ran_ms) for t in calls if t.ran_ms is not None]
    return {
        "calls": len(calls),
        "between_p50": round(percentile(between, 50), 1),
        "between_p99": round(percentile(between, 99), 1),
        "ran_p50": round(percentile(ran, 50), 1),
        "ran_p99": round(percentile(ran, 99), 1),
    }


def tool_lines(calls: Sequence[ToolTimes]) -> list[str]:
    found = tool_summary(calls)
    if not found:
        return []
    return [
        f"tool calls: tool/call -> tool/result p50 {found['between_p50']:.0f} ms, "
        f"p99 {found['between_p99']:.0f} ms; the tool itself ran p50 "
        f"{found['ran_p50']:.0f} ms, p99 {found['ran_p99']:.0f} ms (the rest: the "
        "call made durable, behind its turn's earlier appends, before it runs)"
    ]


def tool_times(log: Iterable[SessionEvent]) -> list[ToolTimes]:
    """The tool calls of one session's log that have a result, in the order they ended."""
    called: dict[str, SessionEvent] = {}
    found = []
    for event in log:
        if isinstance(event, ToolCall):
            called[event.payload.call_id] = event
        elif isinstance(event, ToolResult):
            call = called.pop(event.payload.call_id, None)
            if call is not None:
                between = (event.ts - call.ts).total_seconds() * 1000
                found.append(ToolTimes(between, event.payload.duration_ms))
    return found


def tool_outcomes(events: Iterable[SessionEvent]) -> dict[str, int]:
    """How the tool calls of some logs ended: `ok`, or the error code of the result."""
    counts: dict[str, int] = {}
    for event in events:
        if isinstance(event, ToolResult):
            error = event.payload.error
            key = "ok" if event.payload.ok else (error.code if error is not None else "error")
            counts[key] = counts.get(key, 0) + 1
    return counts


async def _sample(stack: Stack, samples: Samples, stop: asyncio.Event) -> None:
    memory_read = -MEMORY_EVERY_S
    while not stop.is_set():
        with contextlib.suppress(Exception):
            rss, now = None, time.monotonic()
            if now - memory_read >= MEMORY_EVERY_S:
                rss, memory_read = stack.rss(), now
            samples.add(await stack.consumer_lags(), rss)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), SAMPLE_EVERY_S)


async def _probe(driver: Driver, count: int = 5) -> float:
    """p50 latency (ms) of `count` one-turn conversations on an otherwise idle system."""
    latencies = []
    for _ in range(count):
        sent = await driver.say(f"probe-{new_id()[-10:]}", "Hello, just checking.")
        if await driver.wait(sent, 60) and sent.latency_s is not None:
            latencies.append(sent.latency_s * 1000)
    return statistics.median(latencies) if latencies else float("nan")


async def _converse(
    driver: Driver, session_id: str, index: int, turns: int
) -> list[tuple[int, float]]:
    """(turn kind, latency in ms) of each turn that ended."""
    found = []
    for turn in range(turns):
        sent = await driver.say(session_id, line(index, turn))
        if await driver.wait(sent, TURN_TIMEOUT_S) and sent.latency_s is not None:
            found.append((turn_kind(index, turn), sent.latency_s * 1000))
    return found


SHIPPED_LOGS = {"TAVERN_LOG_LEVEL": str(TavernSettings.model_fields["log_level"].default)}
"""The load runs the services at their own default log level, as the containers run them (the
test stack quiets them to WARNING, and so does `tavern up` for its console): their access and
progress lines are part of what a turn costs, about 3% of its CPU (two interleaved rounds of
200 x 20 against ERROR)."""


async def run_load(stack: Stack, sessions: int, turns: int) -> LoadReport:
    """Drive `sessions` x `turns` through a started stack; measure, drain, verify."""
    assert stack.nc is not None
    driver = Driver(stack.nc)
    await driver.open()
    before = await _probe(driver)
    ids = [f"load-{i}-{new_id()[-8:]}" for i in range(sessions)]
    meter = Meter(stack)
    await meter.open()
    samples, stop = Samples(), asyncio.Event()
    sampler = asyncio.create_task(_sample(stack, samples, stop))
    counted = await meter.read()
    started = time.perf_counter()
    found = await asyncio.gather(*(_converse(driver, s, i, turns) for i, s in enumerate(ids)))
    seconds = time.perf_counter() - started
    ended = await meter.read()
    cpu = {name: used - counted.cpu_s.get(name, 0.0) for name, used in ended.cpu_s.items()}
    done = sum(len(per) for per in found)
    load_over = time.monotonic()
    lags_after = await quiesce(stack, driver, timeout=DRAIN_TIMEOUT_S)
    drained = time.monotonic() - load_over if all(v == 0 for v in lags_after.values()) else None
    caught_up = await meter.read()
    await meter.close()
    stop.set()
    await sampler
    after = await _probe(driver)
    rss_after = stack.rss()
    verdict = await verify(stack, driver, ids)
    tools = tool_outcomes(e for check in verdict.checks for e in check.log)
    outcomes: dict[str, int] = {}
    for s in ids:
        for sent in driver.sent[s]:
            outcomes[str(sent.outcome)] = outcomes.get(str(sent.outcome), 0) + 1
    await driver.close()
    return LoadReport(
        sessions,
        turns,
        seconds,
        [ms for per in found for _, ms in per],
        outcomes,
        samples,
        drained,
        lags_after,
        rss_after,
        cpu,
        tools,
        before,
        after,
        verdict.lost,
        verdict.doubled,
        verdict.problems,
        sheet(counted, ended, done, samples.timeline, consumer_services()).with_catch_up(
            ended, caught_up
        ),
        {name: [ms for per in found for k, ms in per if k == n] for n, name in enumerate(KINDS)},
        [times for check in verdict.checks for times in tool_times(check.log)],
    )


@figure(
    "load",
    baseline="load_raw",
    servers=("fsync",),
    count=SESSIONS * TURNS,
    description=f"{SESSIONS} concurrent sessions x {TURNS} turns through the whole stack "
    "(4 service processes, offline model); rate = turns/s, latency = input -> turn/end",
)
async def load(env: Env, n: int) -> Result:
    """Starts a stack of its own (nats-server, PostgreSQL, four services): `env` is unused."""
    sessions, turns = shape(n)
    keep = bool(os.environ.get("TAVERN_KEEP_STACK"))  # a root of its own, printed, not removed
    stack = Stack(proxied=False, env=SHIPPED_LOGS, root=None if keep else env.directory("stack"))
    try:
        await enable_statement_stats(stack)
        await stack.start()
        report = await run_load(stack, sessions, turns)
    finally:
        await stack.close()  # a failed load's stack stays in the runner's kept directory
    if keep:
        print(f"    kept the stack in {stack.root}", flush=True)
    else:
        stack.remove()
    for text in report.lines():
        print(f"    {text}", flush=True)
    if report.lost or report.doubled or report.problems:
        print(f"    LOST {report.lost[:5]} DOUBLED {report.doubled[:5]} {report.problems[:5]}")
    return Result(
        len(report.latencies_ms),
        report.seconds,
        tuple(report.latencies_ms),
        {
            "cost_sheet": report.cost.as_json(),
            "latency_by_kind_ms": report.kinds_json(),
            "tool_calls_ms": tool_summary(report.tool_calls),
        },
    )


@baseline(
    "load_raw",
    servers=("fsync",),
    count=SESSIONS * TURNS,
    description=f"the load's bus traffic with plain nats-py: {SESSIONS} concurrent sessions, "
    f"per turn one input and the session events the load's turn appends ({CHAT_TURN_EVENTS} "
    f"for a chat turn, {TOOL_TURN_EVENTS} with a tool call, {EVENT_BYTES} bytes each), "
    "awaited one after the other",
)
async def load_raw(env: Env, n: int) -> Result:
    sessions, turns = shape(n)
    nc = await nats.connect(env.nats_url, name="bench-load-raw")
    js = nc.jetstream(timeout=30)
    try:
        await js.add_stream(name="RAWLOAD", subjects=["rawload.>"])
        said = json.dumps({"text": "x" * (INPUT_BYTES - 12)}).encode()
        event = json.dumps({"text": "x" * (EVENT_BYTES - 12)}).encode()

        async def session(index: int) -> list[float]:
            latencies = []
            for turn in range(turns):
                t0 = time.perf_counter()
                await js.publish(f"rawload.input.s{index}", said, headers={"Nats-Msg-Id": new_id()})
                for _ in range(raw_events(index, turn)):
                    await js.publish(f"rawload.session.s{index}.e", event)
                latencies.append((time.perf_counter() - t0) * 1000)
            return latencies

        started = time.perf_counter()
        found = await asyncio.gather(*(session(i) for i in range(sessions)))
        seconds = time.perf_counter() - started
    finally:
        await nc.close()
    latencies: Sequence[float] = [ms for per in found for ms in per]
    return Result(len(latencies), seconds, tuple(latencies))
