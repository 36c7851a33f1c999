"""What must hold after any fault, checked from the outside: the session logs, the inputs they
claim, the chat files, the ledger's evidence, the archive and the dead letters.

Every check returns findings (strings) instead of asserting, so a run can report all of them
and count what was lost or doubled.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo

import asyncpg
from nats.aio.client import Client

from tavern_events import subjects
from tavern_events.dlq import DeadLetter, decode_dead_letter
from tavern_events.envelope import SessionEvent
from tavern_events.session import SessionCreated
from tavern_events.streams import DLQ, SESSIONS
from tavern_ledger.config import LedgerSettings
from tavern_ledger.domain.extract import ExtractConfig
from tavern_ledger.domain.ingestion import Incoming, plan_batch
from tavern_ledger.ledger import INGEST_SUBJECTS, gate_config
from tavern_projector.domain import chat
from tavern_projector.domain.chat import ChatBinding
from tavern_projector.projections.chat import Names
from tavern_runtime import directget
from tavern_runtime.sessionlog import read_event
from tests.reliability.driver import Sent

DONE = ("completed", "failed")


@dataclass
class StoredEvent:
    stream_seq: int
    subject: str
    event: SessionEvent


@dataclass
class SessionCheck:
    """The findings for one session."""

    session_id: str
    events: list[StoredEvent] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    doubled: list[str] = field(default_factory=list)

    @property
    def log(self) -> list[SessionEvent]:
        return [e.event for e in self.events]


async def read_log(nc: Client, session_id: str, check: SessionCheck) -> None:
    """Every stored message of the session, decoded; unreadable ones are problems."""
    async for msg in directget.scan(nc, SESSIONS.name, subjects.session_filter(session_id)):
        try:
            event = read_event(msg.data)
        except Exception as exc:
            check.problems.append(f"stream seq {msg.seq}: unreadable event ({exc})")
            continue
        if event is None:
            check.problems.append(f"stream seq {msg.seq}: unknown event type")
            continue
        check.events.append(StoredEvent(msg.seq, msg.subject, event))


def check_shape(check: SessionCheck) -> None:
    """Gapless seqs, unique ids, turns and steps that close and never nest, tool calls each
    answered once."""
    log = check.log
    seqs = [e.seq for e in log]
    if seqs != list(range(1, len(log) + 1)):
        check.problems.append(f"log seqs are not 1..{len(log)}: {_gaps(seqs)}")
    for event_id, n in Counter(e.id for e in log).items():
        if n > 1:
            check.doubled.append(f"event id {event_id} stored {n} times")
    for stored in check.events:
        if stored.event.session_id != check.session_id:
            check.problems.append(f"seq {stored.event.seq} names session {stored.event.session_id}")
    if log and not isinstance(log[0], SessionCreated):
        check.problems.append(f"the log starts with {log[0].type}")
    check.problems.extend(nesting_problems(log))
    check.problems.extend(tool_problems(log))


def _gaps(seqs: Sequence[int]) -> str:
    return ", ".join(str(s) for i, s in enumerate(seqs, 1) if s != i)[:200]


def nesting_problems(log: Sequence[SessionEvent]) -> list[str]:
    found: list[str] = []
    turn: int | None = None
    step: int | None = None
    for event in log:
        kind = event.type
        if kind == "turn/start":
            if turn is not None:
                found.append(f"turn {event.turn} starts inside turn {turn} (seq {event.seq})")
            turn, step = event.turn, None
        elif kind == "turn/end":
            if turn != event.turn or step is not None:
                found.append(f"turn/end of turn {event.turn} at seq {event.seq} out of place")
            turn = None
        elif kind == "step/start":
            if turn != event.turn or step is not None:
                found.append(f"step/start at seq {event.seq} out of place")
            step = event.step
        elif kind == "step/end":
            if step != event.step:
                found.append(f"stray step/end at seq {event.seq}")
            step = None
    if turn is not None:
        found.append(f"turn {turn} has no turn/end")
    return found


def tool_problems(log: Sequence[SessionEvent]) -> list[str]:
    calls = Counter(e.payload.call_id for e in log if e.type == "tool/call")
    results = Counter(e.payload.call_id for e in log if e.type == "tool/result")
    asked = Counter(
        c.id for e in log if e.type == "assistant/message" for c in e.payload.tool_calls
    )
    found = [f"tool call {c} has {results[c]} results" for c in asked if results[c] != 1]
    found += [f"tool/call {c} was never asked for" for c in calls if c not in asked]
    found += [f"tool/result {c} answers no call" for c in results if c not in asked]
    return found


def check_claims(check: SessionCheck, sent: Iterable[Sent]) -> None:
    """Each input claimed exactly once (turn/start or step/start), in a turn that ended
    completed or failed."""
    claims: Counter[str] = Counter()
    claimed_in: dict[str, int] = {}
    for event in check.log:
        if event.type in ("turn/start", "step/start"):
            for claim in event.payload.claimed:
                claims[claim.input_id] += 1
                claimed_in.setdefault(claim.input_id, event.turn)
    outcomes = {e.turn: e.payload.outcome for e in check.log if e.type == "turn/end"}
    for item in sent:
        if item.kind == "cancel":
            continue
        n = claims[item.input_id]
        if n == 0:
            check.lost.append(f"input {item.input_id} ({item.text[:40]!r}) never claimed")
        elif n > 1:
            check.doubled.append(f"input {item.input_id} claimed {n} times")
        turn = claimed_in.get(item.input_id)
        if turn is not None and outcomes.get(turn) not in DONE:
            check.lost.append(f"input {item.input_id}: its turn {turn} ended {outcomes.get(turn)}")


async def check_session(nc: Client, session_id: str, sent: Iterable[Sent]) -> SessionCheck:
    check = SessionCheck(session_id)
    await read_log(nc, session_id, check)
    check_shape(check)
    check_claims(check, sent)
    return check


# --- the chat file --------------------------------------------------------------------------------


def expected_chat(
    log: Sequence[SessionEvent], redacted: set[int], names: Names = Names()
) -> tuple[str, bytes] | None:
    """The projector's pure chat projection of a whole log: (chat key, file bytes)."""
    tz = ZoneInfo("UTC")
    if not log or not isinstance(log[0], SessionCreated):
        return None
    p = log[0].payload
    binding = ChatBinding(
        log[0].session_id,
        p.chat_id,
        names.character,
        names.user,
        p.architecture,
        p.context_mode,
        p.parent_session_id,
        p.forked_at_seq,
    )
    state = chat.new_chat(binding, log[0].ts, tz)
    state.redacted = set(redacted)
    for event in log:
        chat.apply(state, event, tz)
    return binding.key, state.render()


async def check_chat(conn: asyncpg.Connection, chats_dir: Path, check: SessionCheck) -> None:
    row = await conn.fetchrow(
        "SELECT chat_key, status FROM projector.chats WHERE session_id = $1", check.session_id
    )
    redacted = {
        r["seq"]
        for r in await conn.fetch(
            "SELECT seq FROM projector.redactions WHERE session_id = $1", check.session_id
        )
    }
    found = expected_chat(check.log, redacted)
    if found is None:
        return
    key, expected = found
    if row is None:
        check.problems.append("the projector has no chat row")
        return
    if row["status"] != "ok" or row["chat_key"] != key:
        check.problems.append(f"chat row {row['chat_key']} status {row['status']} (expected {key})")
        return
    path = chats_dir / f"{key}.jsonl"
    actual = path.read_bytes() if path.exists() else b""
    if actual != expected:
        _diff_chat(check, actual, expected)


def _diff_chat(check: SessionCheck, actual: bytes, expected: bytes) -> None:
    have = actual.decode(errors="replace").splitlines()
    want = expected.decode().splitlines()
    seqs_have = Counter(_line_seq(line) for line in have[1:])
    doubled = [s for s, n in seqs_have.items() if n > 1]
    if doubled:
        check.doubled.append(f"chat lines doubled for seqs {doubled}")
    missing = set(map(_line_seq, want[1:])) - set(seqs_have)
    if missing:
        check.lost.append(f"chat lines missing for seqs {sorted(missing)}")
    check.problems.append(
        f"chat file differs from a fresh projection ({len(have)} vs {len(want)} lines)"
    )


def _line_seq(line: str) -> int:
    try:
        return int(json.loads(line)["extra"]["agentTavern"]["eventSeq"])
    except (ValueError, KeyError, TypeError):
        return -1


# --- the ledger's evidence ------------------------------------------------------------------------


def expected_evidence(checks: Sequence[SessionCheck]) -> tuple[set[str], set[str]]:
    """Evidence ids and refusal keys a fresh ingestion of these logs plans (stream order)."""
    settings = LedgerSettings()
    ingest = {s.removeprefix("tavern.session.*.") for s in INGEST_SUBJECTS}
    stored = sorted(
        (e for c in checks for e in c.events if e.subject.split(".", 3)[-1] in ingest),
        key=lambda e: e.stream_seq,
    )
    plan = plan_batch(
        [Incoming(e.stream_seq, e.event) for e in stored],
        {},
        gate_config(settings),
        ExtractConfig(subagent_downgrade=settings.ledger_subagent_downgrade),
    )
    ids = {a.row.id for a in plan.admitted}
    refused = {r.audit.dedupe_key for r in plan.refused if r.audit.dedupe_key}
    return ids, refused


@dataclass
class EvidenceCheck:
    expected: int = 0
    stored: int = 0
    missing: set[str] = field(default_factory=set)
    extra: set[str] = field(default_factory=set)
    refusals_missing: set[str] = field(default_factory=set)


async def check_evidence(conn: asyncpg.Connection, checks: Sequence[SessionCheck]) -> EvidenceCheck:
    ids, refused = expected_evidence(checks)
    sessions = [c.session_id for c in checks]
    rows = await conn.fetch(
        "SELECT id FROM ledger.evidence WHERE session_id = ANY($1::text[])", sessions
    )
    stored = {r["id"] for r in rows}
    keys = {
        r["dedupe_key"]
        for r in await conn.fetch(
            "SELECT dedupe_key FROM ledger.audit WHERE dedupe_key = ANY($1::text[])", list(refused)
        )
    }
    return EvidenceCheck(len(ids), len(stored), ids - stored, stored - ids, refused - keys)


# --- the archive ----------------------------------------------------------------------------------


async def check_archive(conn: asyncpg.Connection, check: SessionCheck) -> None:
    rows = await conn.fetch(
        "SELECT stream_seq, event_id FROM projector.session_events WHERE session_id = $1",
        check.session_id,
    )
    archived = {r["stream_seq"]: r["event_id"] for r in rows}
    stored = {e.stream_seq: e.event.id for e in check.events}
    if archived != stored:
        missing = sorted(set(stored) - set(archived))
        extra = sorted(set(archived) - set(stored))
        check.problems.append(f"archive differs: missing {missing[:10]}, extra {extra[:10]}")


# --- dead letters ---------------------------------------------------------------------------------


async def dead_letters(nc: Client) -> list[DeadLetter]:
    """Every record on the DLQ stream."""
    found = []
    async for msg in directget.scan(nc, DLQ.name, subjects.DLQ_ALL):
        try:
            found.append(decode_dead_letter(msg.data))
        except Exception:
            continue
    return found


def letters_about(letters: Iterable[DeadLetter], session_ids: Iterable[str]) -> list[DeadLetter]:
    wanted = set(session_ids)
    return [d for d in letters if _subject_session(d.subject) in wanted]


def _subject_session(subject: str) -> str | None:
    parts = subject.split(".")
    return parts[2] if len(parts) > 2 and parts[1] in ("session", "input") else None
