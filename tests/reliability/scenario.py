"""Scripted conversations for the reliability suite and the checks run once the system is quiet.

A conversation uses the offline model's plain-word tool requests, so every turn exercises the
loop, the ledger's stores (memory and variable RPCs), ingestion, the projector and the
consolidator.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import asyncpg

from tavern_events.dlq import DeadLetter
from tests.reliability import invariants
from tests.reliability.driver import Driver, Sent
from tests.reliability.invariants import EvidenceCheck, SessionCheck
from tests.reliability.stack import Stack
from tests.support import eventually


def script_line(session: int, k: int) -> str:
    """The k-th thing said in conversation `session`: chat, memory writes, variable writes,
    memory searches."""
    kind = k % 4
    if kind == 0:
        return f"Hello, this is conversation {session}, message {k}. How are you?"
    if kind == 1:
        return f"remember that conversation {session} likes colour number {k}"
    if kind == 2:
        return f'call variable_set with {{"scope": "chat", "name": "counter_{k}", "value": {k}}}'
    return "search memory for colour"


@dataclass
class Conversation:
    session_id: str
    index: int
    turns: int = 0
    stuck: list[Sent] = field(default_factory=list)


async def converse(
    driver: Driver,
    convo: Conversation,
    stop: asyncio.Event,
    *,
    min_turns: int = 2,
    max_turns: int = 1000,
    wait_s: float = 120.0,
    think_s: tuple[float, float] = (0.5, 1.5),
) -> Conversation:
    """Say the script line by line, each after the previous turn ended and a pause, until
    `stop` (and at least `min_turns`)."""
    rng = random.Random(convo.session_id)
    for k in range(max_turns):
        if stop.is_set() and k >= min_turns:
            break
        sent = await driver.say(convo.session_id, script_line(convo.index, k))
        if not await driver.wait(sent, wait_s):
            convo.stuck.append(sent)
        convo.turns += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), rng.uniform(*think_s))
    return convo


async def quiesce(stack: Stack, driver: Driver, timeout: float = 90.0) -> dict[str, int]:
    """Every input's turn ended and every durable consumer caught up; returns the lags."""
    await asyncio.gather(*(driver.wait(s, timeout) for s in driver.all_sent()))

    async def caught_up() -> dict[str, int] | None:
        lags = await stack.consumer_lags()
        return lags if all(v == 0 for v in lags.values()) else None

    try:
        return await eventually(caught_up, timeout=timeout, interval=0.5)
    except AssertionError:
        return await stack.consumer_lags()


@dataclass
class Verdict:
    """What the checks found over a set of sessions."""

    checks: list[SessionCheck]
    evidence: EvidenceCheck
    letters: list[DeadLetter]
    """The dead letters about the checked sessions."""
    inputs: int

    @property
    def dead_letters(self) -> int:
        return len(self.letters)

    def letter_reasons(self) -> list[str]:
        """Who gave up on what, and why: what a failed check shows."""
        return [
            f"{d.consumer} ({d.service}) on {d.subject} #{d.stream_seq} after {d.deliveries}: "
            f"{d.error_type}: {d.reason[:300]}"
            for d in self.letters
        ]

    @property
    def lost(self) -> list[str]:
        found = [f"{c.session_id}: {x}" for c in self.checks for x in c.lost]
        return found + [f"evidence {i} not stored" for i in sorted(self.evidence.missing)]

    @property
    def doubled(self) -> list[str]:
        found = [f"{c.session_id}: {x}" for c in self.checks for x in c.doubled]
        return found + [f"evidence {i} not planned" for i in sorted(self.evidence.extra)]

    @property
    def problems(self) -> list[str]:
        found = [f"{c.session_id}: {x}" for c in self.checks for x in c.problems]
        missing = self.evidence.refusals_missing
        return found + [f"refusal {k} not audited" for k in sorted(missing)]


async def verify(stack: Stack, driver: Driver, sessions: Sequence[str]) -> Verdict:
    """All invariants over `sessions`; the chat files get a few seconds to catch up."""
    assert stack.nc is not None
    conn = await asyncpg.connect(stack.database_url)
    try:
        checks = []
        for session_id in sessions:
            await driver.settled(session_id)
            check = await invariants.check_session(stack.nc, session_id, driver.sent[session_id])
            await _settled_chat(conn, stack, check)
            await invariants.check_archive(conn, check)
            checks.append(check)
        evidence = await invariants.check_evidence(conn, checks)
    finally:
        await conn.close()
    letters = invariants.letters_about(await invariants.dead_letters(stack.nc), sessions)
    inputs = sum(len(driver.sent[s]) for s in sessions)
    return Verdict(checks, evidence, letters, inputs)


async def _settled_chat(conn: asyncpg.Connection, stack: Stack, check: SessionCheck) -> None:
    """The chat check, repeated for a moment while the projector may still be writing."""
    give_up = time.monotonic() + 10
    while True:
        trial = SessionCheck(check.session_id, check.events)
        await invariants.check_chat(conn, stack.chats_dir, trial)
        if not trial.problems or time.monotonic() > give_up:
            check.problems += trial.problems
            check.lost += trial.lost
            check.doubled += trial.doubled
            return
        await asyncio.sleep(0.5)
