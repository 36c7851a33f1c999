"""Intake: LEDGER facts and SESSIONS events become the consolidator's copies, one transaction per
batch of messages (idempotent, so a redelivered batch changes nothing), then the scopes they
touched are woken. Poison messages are dead-lettered; unknown types are skipped and counted."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from nats.aio.msg import Msg

from tavern_consolidator.domain.intake import FACTUAL, Changes, add_event, add_fact
from tavern_consolidator.store import PoolSource, connection, facts, transaction
from tavern_events.envelope import LedgerFact, Model, SessionEvent
from tavern_events.errors import ContractError
from tavern_events.skips import SkipCounter
from tavern_events.subjects import InvalidIdError
from tavern_events.union import Decoded, decode_or_skip
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

DeadLetter = Callable[[Msg, Exception], Awaitable[None]]


@dataclass(frozen=True)
class Touched:
    """Scopes a batch changed: new evidence or turns (distillation) and human evidence or
    ended turns (the rules channel)."""

    distil: frozenset[str]
    rules: frozenset[str]
    judge: frozenset[str] = frozenset()
    """Scopes with new claims of fact for the model to judge (judging on)."""


class Intake:
    def __init__(self, pool: PoolSource, dead_letter: DeadLetter, judging: bool = False) -> None:
        """`judging`: a model judges new claims of fact (`judge.py`)."""
        self._pool, self._dead_letter, self._judging = pool, dead_letter, judging
        self.skips = SkipCounter()

    async def ledger_facts(self, msgs: Sequence[Msg]) -> Touched:
        changes = Changes()
        for msg in msgs:
            fact = await self._decode(msg, LedgerFact)
            if fact is not None:
                add_fact(changes, fact)
        return await self._apply(changes)

    async def session_events(self, msgs: Sequence[Msg]) -> Touched:
        changes = Changes()
        for msg in msgs:
            event = await self._decode(msg, SessionEvent)
            if isinstance(event, SessionEvent):
                add_event(changes, event)
        return await self._apply(changes)

    async def _decode(self, msg: Msg, expect: type[Model]) -> Model | None:
        try:
            found = decode_or_skip(msg.data, self.skips, expect)
        except (ContractError, InvalidIdError) as exc:
            await self._dead_letter(msg, exc)
            return None
        return found.event if isinstance(found, Decoded) else None

    async def _apply(self, c: Changes) -> Touched:
        """Save in one transaction; a batch saved by one statement (the common lone turn end or
        evidence) is atomic without one, and a batch that changes nothing touches nothing."""
        count = facts.statements(c)
        if count == 0:
            return Touched(frozenset(), frozenset(c.human_scopes))
        async with (transaction if count > 1 else connection)(self._pool) as conn:
            await facts.save_sessions(conn, c.sessions)
            await facts.save_evidence(conn, c.evidence, self._judging)  # and scope rows
            await facts.change_states(conn, c.states)
            await facts.not_to_judge(conn, sorted(c.replacing))
            await facts.save_observations(conn, c.observations)
            await facts.save_rules(conn, c.rules)
            turn_scopes = set(await facts.save_turns(conn, c.turns))  # with theirs
        if c.evidence or c.turns or c.observations:
            log.info(
                "facts_copied",
                evidence=len(c.evidence),
                states=len(c.states),
                observations=len(c.observations),
                rules=len(c.rules),
                turns=len(c.turns),
            )
        distil = c.evidence_scopes | turn_scopes
        judge = {e.scope_id for e, _ in c.evidence if e.claim_kind in FACTUAL}
        return Touched(
            frozenset(distil),
            frozenset(c.human_scopes | turn_scopes),
            frozenset(judge if self._judging else ()),
        )
