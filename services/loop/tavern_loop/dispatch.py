"""Dispatch: a durable pull consumer over every session's inputs that only wakes sessions.

For each input it makes sure some replica runs the session (taking the lease when it is free)
and acks once the session's log records the input as claimed and the turn that claimed it as
ended. While it waits it tells the server the message is in progress, so a crashed replica's
inputs are redelivered to another, which then closes the turn the crash left open.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from tavern_events import subjects
from tavern_events.envelope import InputCommand
from tavern_events.errors import ContractError, UnknownEventError
from tavern_events.input import CancelInput
from tavern_events.streams import SESSIONS
from tavern_events.subjects import InvalidIdError
from tavern_events.union import decode
from tavern_loop.lease import Leases
from tavern_loop.runner import SessionRunner
from tavern_runtime import dlq
from tavern_runtime.logs import get_logger
from tavern_runtime.provision import ConsumerSpec

log = get_logger(__name__)

DURABLE = "loop-dispatch"
SERVICE = "loop"
POLL_S = 0.5
HEARTBEAT_S = 3.0

MakeRunner = Callable[[str, Leases], SessionRunner | None]


async def claimed_in_log(js: JetStreamContext, session_id: str, stream_seq: int) -> bool:
    """Whether the session's log claims the input at INPUTS sequence `stream_seq`."""
    return await log_cursor(js, session_id) >= stream_seq


async def settled_in_log(js: JetStreamContext, session_id: str, stream_seq: int) -> bool:
    """Whether the log claims the input and its last turn has ended (so the input's did)."""
    if await log_cursor(js, session_id) < stream_seq:
        return False
    return await _last_turn_closed(js, session_id)


async def _last_turn_closed(js: JetStreamContext, session_id: str) -> bool:
    started = await _last_seq(js, session_id, "turn/start")
    return started == 0 or await _last_seq(js, session_id, "turn/end") > started


async def _last_seq(js: JetStreamContext, session_id: str, event_type: str) -> int:
    try:
        found = await js.get_msg(SESSIONS.name, subject=_subject(session_id, event_type))
    except NotFoundError:
        return 0
    return found.seq or 0


async def log_cursor(js: JetStreamContext, session_id: str) -> int:
    """The INPUTS sequence of the last input the session's log claims (0: none yet).

    Claims only grow, so the highest one is in the last turn: on its turn/start, on any of
    its step/starts (a mid-turn claim), not necessarily the last step/start, which may claim
    nothing, or on a `context/compaction-skipped` that answered a `/compact` "busy".
    """
    try:
        start = await js.get_msg(SESSIONS.name, subject=_subject(session_id, "turn/start"))
    except NotFoundError:
        return 0
    cursor, seq = _highest_claim(start.data), start.seq or 0
    for event_type in ("step/start", "context/compaction-skipped"):
        cursor = max(cursor, await _claims_after(js, _subject(session_id, event_type), seq))
    return cursor


async def _claims_after(js: JetStreamContext, subject: str, seq: int) -> int:
    """The highest claim of the events on `subject` stored after stream sequence `seq`."""
    cursor = 0
    while True:
        try:
            found = await js.get_msg(SESSIONS.name, seq=seq + 1, subject=subject, next=True)
        except NotFoundError:
            return cursor
        cursor, seq = max(cursor, _highest_claim(found.data)), found.seq or seq + 1


def _subject(session_id: str, event_type: str) -> str:
    return subjects.session_event(session_id, event_type)


def _highest_claim(data: bytes | None) -> int:
    claimed = json.loads(data or b"{}").get("payload", {}).get("claimed", [])
    return max((int(c.get("stream_seq", 0)) for c in claimed), default=0)


class Dispatcher:
    def __init__(
        self,
        nc: Client,
        leases: Leases,
        start_runner: Callable[[str], asyncio.Future[SessionRunner] | None],
        runners: dict[str, SessionRunner],
        concurrency: int = 512,
    ) -> None:
        self._nc, self._js, self._leases = nc, nc.jetstream(), leases
        self._start_runner, self._runners = start_runner, runners
        self._slots = asyncio.Semaphore(concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._stopping = asyncio.Event()
        self._sub: JetStreamContext.PullSubscription | None = None

    async def run(self) -> None:
        self._sub = sub = await self._js.pull_subscribe(
            subjects.INPUTS_ALL, durable=DURABLE, stream="INPUTS"
        )
        backoff = 0.1
        while not self._stopping.is_set():
            try:
                msgs = await sub.fetch(64, timeout=1.0)
                backoff = 0.1
            except (TimeoutError, NatsTimeout):
                continue
            except Exception as exc:
                log.warning("dispatch_fetch_failed", error=type(exc).__name__, retry_in=backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            for msg in msgs:
                await self._slots.acquire()
                task = asyncio.create_task(self._handle(msg))
                self._tasks.add(task)
                task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    async def stop(self) -> None:
        self._stopping.set()
        for task in list(self._tasks):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tasks, return_exceptions=True)
        # Unsubscribe now: nats-py never finishes draining a pull subscription whose last
        # fetch timed out, so leaving it to the connection's drain stalls every shutdown.
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()

    async def _handle(self, msg: Msg) -> None:
        try:
            session_id = subjects.session_id_of(msg.subject)
            command = decode(msg.data, InputCommand)
            if command.session_id != session_id:
                raise ContractError("input session_id does not match its subject")
        except (ContractError, UnknownEventError, InvalidIdError) as exc:
            await dlq.dead_letter(
                self._js, msg, service=SERVICE, consumer=DURABLE, reason=str(exc), error=exc
            )
            return
        if isinstance(command, CancelInput):
            runner = self._runners.get(session_id)
            if runner is not None:
                runner.cancel.set()
            await msg.ack()
            return
        await self._until_claimed(msg, session_id, msg.metadata.sequence.stream)

    async def _until_claimed(self, msg: Msg, session_id: str, stream_seq: int) -> None:
        """Ack only once the input's turn has ended: acked at its claim, an input whose turn a
        crash left open would wake no one, and the open turn would wait for the next input."""
        beat = asyncio.get_running_loop().time()
        while True:
            runner = self._runners.get(session_id)
            if runner is not None and runner.settled(stream_seq):
                break
            if runner is None and await settled_in_log(self._js, session_id, stream_seq):
                break
            if runner is None:
                self._start_runner(session_id)
            await asyncio.sleep(POLL_S)
            now = asyncio.get_running_loop().time()
            if now - beat > HEARTBEAT_S:
                await msg.in_progress()
                beat = now
        await msg.ack()
        log.debug("input_claimed", session_id=session_id, stream_seq=stream_seq)


def dispatch_consumer() -> ConsumerSpec:
    """The shared durable consumer of every loop replica (provisioned by `tavern init`)."""
    return ConsumerSpec(
        name=DURABLE,
        stream="INPUTS",
        filter_subjects=(subjects.INPUTS_ALL,),
        max_deliver=20,
        ack_wait_s=10.0,  # in-progress every HEARTBEAT_S keeps a waiting input ours
        max_ack_pending=20_000,
        description="Wakes the session of each input; acked once the session log claims it.",
    )
