"""A session runner: holds the session's lease while it has work and runs its turns in order.

A new holder first closes a turn its predecessor left open (crash repair), then claims every
input after the log's cursor. Before letting the lease go it looks for inputs once more.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

from nats.aio.client import Client
from nats.aio.msg import Msg

from tavern_events import subjects
from tavern_events.envelope import SessionEvent
from tavern_events.session import SessionCreated
from tavern_loop.commands import Creation
from tavern_loop.domain.access import creator, input_refusal
from tavern_loop.domain.binding import Refusal, created_binding, default_binding
from tavern_loop.domain.drafts import Drafter
from tavern_loop.domain.repair import repair_events
from tavern_loop.inputs import Arrivals, PendingInput, arrived_inputs, parse_input
from tavern_loop.lease import Lease, LeaseKeeper, Leases
from tavern_loop.sessionlog import HeldLog
from tavern_loop.turn import LoopDeps, TurnRunner, input_rejection
from tavern_runtime import tracing
from tavern_runtime.errors import ConcurrencyConflict
from tavern_runtime.logs import get_logger
from tavern_runtime.principals import LOCAL_OWNER
from tavern_runtime.sessionlog import SessionLogReader, SessionLogWriter

log = get_logger(__name__)


def choose_claim(
    pending: list[PendingInput],
    limit: int,
    refused: Callable[[PendingInput], bool] = lambda item: False,
    messages: int = 1,
) -> list[PendingInput]:
    """What the next turn claims: the readable inputs in order (stale cancels included, so the
    cursor passes them), up to `messages` messages.

    Messages sent while the session was idle are follow-ups: as in DSH, each is entered in a
    turn of its own (`messages` = 1, the default; `TAVERN_LOOP_FOLLOWUPS_PER_TURN`). A
    command is claimed alone, so it runs at an idle turn boundary in a turn of its own. An
    input the pre-step refuses is claimed alone too: the inputs before it make a turn of their
    own, so a refused message never takes a good one down with it.
    """
    claim: list[PendingInput] = []
    for item in pending[:limit]:
        if item.command is None:
            continue  # unreadable: the dispatcher dead-letters it
        alone = item.slash is not None or refused(item)
        if alone and _has_work(claim):
            break
        if item.message is not None and sum(p.message is not None for p in claim) >= messages:
            break
        claim.append(item)
        if alone:
            break
    return claim if _has_work(claim) else []


def _has_work(claim: list[PendingInput]) -> bool:
    return any(p.message or p.slash for p in claim)


ARRIVAL_RETRIES_S = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.4)
"""Pauses between reads for an input seen live but not yet read (about 0.8 s in all)."""


class SessionRunner:
    def __init__(
        self,
        session_id: str,
        lease: Lease,
        leases: Leases,
        nc: Client,
        deps: LoopDeps,
        writer: SessionLogWriter,
    ) -> None:
        self.session_id, self.lease, self._leases = session_id, lease, leases
        self._nc, self._deps, self._writer = nc, deps, writer
        self.held: HeldLog | None = None
        self.cancel = asyncio.Event()
        self.progress = asyncio.Event()  # set whenever a claim landed
        self._wake = asyncio.Event()  # an input of this session arrived
        self._arrivals = Arrivals()  # which ones, for the step boundaries of a turn
        self._first_read = True
        self._seen: list[PendingInput] = []
        """The unclaimed inputs of the last read (what the next turn's claim was chosen from)."""
        self._read: tuple[int, int] = (0, 0)
        """The log seq of the last event this runner read, and where its last message is."""
        ttl = deps.options.lease_ttl_s
        self._keeper = LeaseKeeper(leases, lease, ttl / 3, ttl)
        self._turn: TurnRunner | None = None
        """The turn running now, which the watcher answers a `/compact` from."""
        self._answers: set[asyncio.Task[int]] = set()

    def claimed(self, stream_seq: int) -> bool:
        return self.held is not None and self.held.durable_cursor >= stream_seq

    def settled(self, stream_seq: int) -> bool:
        """The input is claimed and the turn that claimed it has ended (durably)."""
        return self.held is not None and self.held.settled_cursor >= stream_seq

    async def run(self) -> None:
        self._keeper.start()
        sub = await self._nc.subscribe(subjects.input_filter(self.session_id), cb=self._live)
        finished = False
        try:
            await self._run()
            finished = True
        except ConcurrencyConflict:
            log.warning("session_taken_over", session_id=self.session_id)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            for task in list(self._answers):
                task.cancel()
            if self.held is not None:
                await self.held.close()
                if finished:
                    self._keep_log(self.held)
            await self._keeper.stop()
            if not self._keeper.lost.is_set():
                await self._leases.release(self.lease)

    async def _live(self, msg: Msg) -> None:
        """Core delivery of the session's inputs: a cancel acts at once, a `/compact` sent
        while a turn runs is answered "busy" at once, anything wakes."""
        self._wake.set()
        self._arrivals.note(msg)
        if msg.subject.endswith(".cancel"):
            item = parse_input(0, msg.subject, msg.data, msg.headers)
            if item.is_cancel and self._may_cancel(item):
                log.info("cancel_received", session_id=self.session_id)
                self.cancel.set()
        elif msg.subject.endswith(".command") and self._turn is not None:
            slash = parse_input(0, msg.subject, msg.data, msg.headers).slash
            if slash is not None and slash.payload.name == "compact":
                self._answer_busy(self._turn)

    def _answer_busy(self, turn: TurnRunner) -> None:
        """Answer from the running turn, off the delivery callback (it reads INPUTS for the
        command's stream sequence, and what is still unclaimed before it)."""
        task = asyncio.create_task(turn.answer_busy())
        self._answers.add(task)
        task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[int]) -> None:
        self._answers.discard(task)
        if task.cancelled():
            return
        error = task.exception()
        if error is not None:  # the step boundary answers it instead
            log.warning("busy_answer_failed", session_id=self.session_id, error=str(error))

    def _may_cancel(self, item: PendingInput) -> bool:
        """Only the session's owner (or the operator) cancels its turn."""
        if self.held is None or self._deps.credentials is None:
            return False
        item = item.authenticated(self._deps.credentials)
        refusal = input_refusal(item.principal, item.auth_error, self.held.state.binding.owner)
        if refusal is not None:
            log.warning(
                "access_refused", session_id=self.session_id, input=item.input_id, reason=refusal
            )
        return refusal is None

    async def _run(self) -> None:
        events = await self._read_log()
        self.held = HeldLog(self.session_id, self._writer, events, may_pipeline=self._keeper.fresh)
        await self._repair(self.held)
        stopping = self._deps.stopping
        while not self._keeper.lost.is_set() and not stopping.is_set():
            self._wake.clear()
            claim = await self._claim_or_wait(self.held)
            if not claim:
                if await self._idle():
                    continue
                return
            with _turn_span(self.session_id, claim):
                await self._run_turn(self.held, claim)
            self.progress.set()

    async def _run_turn(self, held: HeldLog, claim: list[PendingInput]) -> None:
        self.cancel = asyncio.Event()  # before waiting for a slot: a cancel meanwhile counts
        async with self._deps.slots.slot(asyncio.get_running_loop().time()) as slot:
            if self._deps.stopping.is_set():
                return  # the replica stops: nothing staged, the inputs wait unclaimed
            with tracing.span("loop.claim", attributes=lambda: {"tavern.inputs": len(claim)}):
                creation = self._ensure_created(held, claim)
            turn = TurnRunner(held, self._deps, self.cancel, creation, self._arrivals)
            turn.followups = self._followups(claim)
            turn.slot = slot
            self._turn = turn
            try:
                await turn.run(claim)
            finally:
                self._turn = None

    async def _read_log(self) -> list[SessionEvent]:
        """The session's log: the one its last runner here let go, with what was stored
        after it, when that continues it; else read whole."""
        reader = SessionLogReader(self._deps.js)
        known = self._deps.logs.take(self.session_id)
        if known is not None:
            newer, through = await reader.read(self.session_id, after_stream_seq=known.stream_seq)
            events = known.extended(newer)
            if events is not None:
                self._read = (events[-1].seq if events else 0, through)
                return events
            log.warning("kept_log_discontinued", session_id=self.session_id)
        events, through = await reader.read(self.session_id)
        self._read = (events[-1].seq if events else 0, through)
        return events

    def _keep_log(self, held: HeldLog) -> None:
        """Leave the log for the session's next runner here, if all of it is durable and
        where its last message is stored is known."""
        if held.failure is not None or held.durable_seq != held.state.last_seq:
            return
        if not held.events:
            return
        last = held.events[-1]
        head = self._writer.heads.get(self.session_id)
        if head is not None and (head.event_id, head.log_seq) == (last.id, last.seq):
            self._deps.logs.keep(self.session_id, held.events, head.stream_seq)
        elif self._read[0] == last.seq:  # nothing appended since the read
            self._deps.logs.keep(self.session_id, held.events, self._read[1])

    async def _idle(self) -> bool:
        """Keep the lease a moment for the next input (no new lease, no log re-read)."""
        hold = self._deps.options.idle_hold_s
        if hold <= 0:
            return False
        waits = [asyncio.ensure_future(e.wait()) for e in (self._wake, self._deps.stopping)]
        _, pending = await asyncio.wait(waits, timeout=hold, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        return self._wake.is_set() and not self._deps.stopping.is_set()

    async def _claim_or_wait(self, held: HeldLog) -> list[PendingInput]:
        """The next claim; when an input seen live is in no read yet (a replicated stream
        stores it a moment after its delivery), read again shortly rather than sleep through
        the idle hold. One never stored (refused by the stream) is forgotten after a while."""
        claim = await self._next_claim(held)
        for delay in ARRIVAL_RETRIES_S:
            if claim or not self._arrivals.waiting(held.state.claimed_ids):
                return claim
            await asyncio.sleep(delay)
            claim = await self._next_claim(held)
        if not claim:
            self._arrivals.ids.clear()
        return claim

    async def _next_claim(self, held: HeldLog) -> list[PendingInput]:
        state = held.state
        found = await arrived_inputs(
            self._deps.js,
            self.session_id,
            state.input_cursor,
            self._deps.options.max_claims_per_turn,
            self._arrivals,
            state.claimed_ids,
            leader=self._first_read,  # woken for inputs that arrived before it listened
        )
        self._first_read = False
        fresh = [self._authenticated(p) for p in found if p.input_id not in state.claimed_ids]
        self._seen = fresh
        options = self._deps.options
        owner = state.binding.owner if state.created else _creator(fresh)
        return choose_claim(
            fresh,
            options.max_claims_per_turn,
            lambda item: input_rejection(item, options, owner) is not None,
            options.followups_per_turn,
        )

    def _followups(self, claim: list[PendingInput]) -> frozenset[str]:
        """Messages already waiting when the turn claimed: they wait for turns of their own
        rather than join this one at a step boundary."""
        claimed = {p.input_id for p in claim}
        return frozenset(
            p.input_id for p in self._seen if p.message is not None and p.input_id not in claimed
        )

    def _authenticated(self, item: PendingInput) -> PendingInput:
        credentials = self._deps.credentials
        if credentials is None:
            return item
        return item.authenticated(credentials)

    def _draft(self) -> Drafter:
        deps = self._deps
        return Drafter(self.session_id, deps.clock, deps.new_id)

    async def _repair(self, held: HeldLog) -> None:
        events = repair_events(held.state, self._draft())
        if events:
            log.warning("turn_repaired", session_id=self.session_id, turn=events[-1].turn)
            await held.append(*events)

    def _ensure_created(self, held: HeldLog, claim: list[PendingInput]) -> Creation | None:
        """A session's log starts with `session/created`: the binding a first `create` command
        asks for, else the configured defaults (a refused create gets them too, with why).
        The characters it names bind as asked, whoever's they are: every read of a card is held
        to the session's owner (another user's card reads as none, like a card that does not
        exist), so the answer says nothing of whether another user has such a card."""
        if held.state.created:
            return None
        profiles = self._deps.options.profiles
        owner = {"owner": _creator(claim)}
        create = next((p.slash for p in claim if p.slash is not None), None)
        if create is None or create.payload.name != "create":
            binding = default_binding(self.session_id, profiles).model_copy(update=owner)
            held.stage(self._draft()(SessionCreated, binding))
            return None
        decided = created_binding(self.session_id, create.payload.args, profiles)
        if "chat_id" in create.payload.args and not _may_name_chat(claim, create.input_id):
            decided = Refusal(NAMED_CHAT_REFUSED)
        refusal = decided.reason if isinstance(decided, Refusal) else None
        if isinstance(decided, Refusal):
            decided = default_binding(self.session_id, profiles)
        decided = decided.model_copy(update=owner)
        held.stage(self._draft()(SessionCreated, decided, causation_id=create.input_id))
        return Creation(refusal)


def _turn_span(session_id: str, claim: list[PendingInput]) -> AbstractContextManager[None]:
    """A turn is a span of the trace its first claimed input was published in (the others are
    linked), so one turn is one trace from the client to the read models."""
    return tracing.span(
        "loop.turn",
        parent=claim[0].trace,
        links=[p.trace for p in claim[1:]],
        attributes=lambda: {"tavern.session_id": session_id, "tavern.inputs": len(claim)},
    )


NAMED_CHAT_REFUSED = (
    "/create: only the operator binds a new session to an existing chat (a chat and its "
    "memory belong to the user who made it)"
)


def _may_name_chat(claim: list[PendingInput], create_id: str) -> bool:
    """Whether the sender of the `create` may name its chat: only the operator may."""
    sender = next((p.principal for p in claim if p.input_id == create_id), None)
    return sender is not None and sender.kind == "operator"


def _creator(items: list[PendingInput]) -> str:
    """Who a session its first inputs create belongs to (`local` if none proved a sender)."""
    working = [p.principal for p in items if p.message is not None or p.slash is not None]
    return creator(working) or LOCAL_OWNER
