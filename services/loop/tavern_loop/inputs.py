"""Reading a session's inputs from the INPUTS stream after the cursor its log records."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace

from nats.aio.msg import Msg
from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.errors import NotFoundError

from tavern_events import subjects
from tavern_events.envelope import InputCommand
from tavern_events.errors import ContractError, UnknownEventError
from tavern_events.input import CancelInput, CommandInput, MessageInput
from tavern_events.parts import ClaimedInput
from tavern_events.streams import INPUTS
from tavern_events.union import decode
from tavern_runtime import tracing
from tavern_runtime.auth import Credentials
from tavern_runtime.errors import TransientError, Unauthenticated
from tavern_runtime.logs import get_logger
from tavern_runtime.principals import HEADER, Principal

log = get_logger(__name__)


@dataclass(frozen=True)
class PendingInput:
    """An input after the cursor; `command` is None for a malformed or unknown one."""

    stream_seq: int
    input_id: str
    kind: str
    command: InputCommand | None
    token: str | None = None
    """The `Tavern-Principal` header it was published with."""
    principal: Principal | None = None
    """Who sent it, once `authenticated`; None if its token is missing or not genuine."""
    auth_error: str | None = None
    stored_at: float | None = None
    """When INPUTS stored it (unix seconds): its token is checked as of then, so an input
    read after an outage is still its sender's."""
    trace: dict[str, str] | None = None
    """The trace context it was published in (when tracing is on): its turn joins that trace."""

    def authenticated(self, credentials: Credentials) -> PendingInput:
        """This input with its verified principal (or why it has none)."""
        headers = {HEADER: self.token} if self.token else {}
        try:
            principal = credentials.principal(headers, at=self.stored_at)
        except Unauthenticated as exc:
            return replace(self, principal=None, auth_error=exc.message)
        return replace(self, principal=principal, auth_error=None)

    def claim(self) -> ClaimedInput:
        kind = self.kind if self.kind in ("message", "cancel", "command") else "command"
        return ClaimedInput(input_id=self.input_id, stream_seq=self.stream_seq, kind=kind)

    @property
    def message(self) -> MessageInput | None:
        return self.command if isinstance(self.command, MessageInput) else None

    @property
    def is_cancel(self) -> bool:
        return isinstance(self.command, CancelInput)

    @property
    def slash(self) -> CommandInput | None:
        return self.command if isinstance(self.command, CommandInput) else None


def parse_input(
    stream_seq: int, subject: str, data: bytes | None, headers: dict[str, str] | None = None
) -> PendingInput:
    """Decode one stored input; a bad one still gets a claimable identity (never stalls)."""
    kind = subject.rsplit(".", 1)[-1]
    token = (headers or {}).get(HEADER)
    trace = tracing.carried(headers)
    try:
        command = decode(data or b"", InputCommand)
    except (ContractError, UnknownEventError) as exc:
        log.warning("input_unreadable", stream_seq=stream_seq, subject=subject, error=str(exc))
        return PendingInput(stream_seq, f"bad-input-{stream_seq}", kind, None, token, trace=trace)
    return PendingInput(stream_seq, command.input_id, kind, command, token, trace=trace)


async def pending_inputs(
    js: JetStreamContext, session_id: str, after: int, limit: int = 64, *, leader: bool = False
) -> list[PendingInput]:
    """Inputs of `session_id` stored after stream sequence `after`, oldest first. Read by direct
    get (any replica answers, one may lag the leader by a moment) unless `leader`."""
    found: list[PendingInput] = []
    seq, subject = after + 1, subjects.input_filter(session_id)
    while len(found) < limit:
        try:
            msg = await js.get_msg(
                INPUTS.name, seq=seq, subject=subject, next=True, direct=not leader
            )
        except NotFoundError:
            break
        except NatsTimeout as exc:
            raise TransientError("INPUTS stream did not answer", session_id=session_id) from exc
        stored = msg.seq or seq
        item = parse_input(stored, msg.subject or subject, msg.data, msg.headers)
        found.append(replace(item, stored_at=msg.time.timestamp() if msg.time else None))
        seq = stored + 1
    return found


@dataclass
class Arrivals:
    """Inputs of a held session seen on core delivery (`Nats-Msg-Id` = input id), so that a
    step boundary reads INPUTS only when something arrived that the log has not claimed.

    An input the boundary cannot claim yet (a command, a cancel, one under another id) keeps
    it reading at every boundary, as it would without this; one delivered without an id
    makes the next boundary read once."""

    ids: set[str] = field(default_factory=set)
    unnamed: bool = False

    def note(self, msg: Msg) -> None:
        input_id = (msg.headers or {}).get("Nats-Msg-Id")
        if input_id:
            self.ids.add(input_id)
        else:
            self.unnamed = True

    def waiting(self, claimed: Collection[str]) -> bool:
        """Whether an arrival is not yet among `claimed` (forgetting those that are)."""
        self.ids = {i for i in self.ids if i not in claimed}
        return bool(self.ids) or self.unnamed

    def read(self) -> None:
        """A boundary read INPUTS: inputs delivered without an id before now were in it."""
        self.unnamed = False

    def missed(self, found: list[PendingInput], claimed: Collection[str]) -> bool:
        """Whether an input seen live and not claimed is not among `found`."""
        seen = {p.input_id for p in found}
        return any(i not in claimed and i not in seen for i in self.ids)


async def arrived_inputs(
    js: JetStreamContext,
    session_id: str,
    after: int,
    limit: int,
    arrivals: Arrivals | None,
    claimed: Collection[str],
    *,
    leader: bool = False,
) -> list[PendingInput]:
    """`pending_inputs`, read again from the stream leader when a replica's answer lacks an
    input that arrived live: on a replicated stream a follower can be a moment behind, and an
    input it has not stored yet would otherwise wait for the session's next wake-up."""
    found = await pending_inputs(js, session_id, after, limit, leader=leader)
    if leader or arrivals is None or not arrivals.missed(found, claimed):
        return found
    log.info("inputs_read_from_leader", session_id=session_id, after=after)
    return await pending_inputs(js, session_id, after, limit, leader=True)
