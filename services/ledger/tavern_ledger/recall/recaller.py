"""Pre-step recall: the session's scope, candidates from the lexical (and optional semantic)
channel plus recent evidence and rules, composed under the budget into source-labelled lines.
An empty or unreachable ledger recalls nothing; it never fails the caller's step.

A group chat's member (`member`) recalls its own memory (its character's scope, derived with
the session's owner as every chat with that character derives it) beside the group chat's;
the budget is shared between the two, and each part is headed by whose memory it is.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from tavern_events.reach import memory_scope
from tavern_ledger.domain.composer import (
    DEFAULT_SECTION_CAP,
    Candidate,
    ComposerConfig,
    Composition,
    Query,
    Scored,
    compose,
    render,
)
from tavern_ledger.domain.eligibility import MATRIX
from tavern_ledger.domain.extract import SessionFacts
from tavern_ledger.domain.ranking import CorpusStats
from tavern_ledger.domain.text import query_terms
from tavern_ledger.evidence import Conn
from tavern_ledger.ingest import Clock, utc_now
from tavern_ledger.recall import queries as recall_store
from tavern_ledger.scopes import evidence as evidence_scope
from tavern_ledger.semantic import NoSemanticIndex, SemanticHit, SemanticIndex
from tavern_ledger.transactions import PoolSource, connection
from tavern_runtime.errors import TavernError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

SEMANTIC_TIMEOUT_S = 1.0
REMEMBERED_SESSIONS = 4096
SCOPE_TTL_S = 60.0
STATS_TTL_S = 60.0
SIZE_TTL_S = 600.0
"""A scope's row count is kept longer: counting a big scope takes milliseconds, and BM25's
weights hardly move while it grows by a few percent."""
REMEMBERED_TERMS = 100_000
MATRIX_READABLE = tuple(a for a, domains in MATRIX.items() if domains)
"""Every authority the eligibility matrix lets speak for some domain."""
EXPLAINED_RANKS = 20
"""How many ranked candidates an explained recall lists (injected or not)."""


@dataclass(frozen=True)
class RecallRequest:
    session_id: str
    query: str
    turn: int = 0
    step: int = 0
    explain: bool = False
    as_of: datetime | None = None
    member: str | None = None
    """A group chat's speaking member, whose own memory is recalled too."""
    member_name: str | None = None
    owner: str | None = None
    """The session's owner (the member's scope is this owner's memory of that character)."""


GROUP_CHAT_HEADING = "[This group chat's memory]"


@dataclass(frozen=True)
class RecallSettings:
    composer: ComposerConfig = field(default_factory=ComposerConfig)
    recent: int = 20
    per_term: int = 16
    lexical: int = 48
    """Lexical hits read per recall (the best by the weight of the query terms they hold)."""
    around: int = 10
    """Lexical hits whose neighbours in their session are read too."""
    observations: bool = False
    observation_authorities: tuple[str, ...] = MATRIX_READABLE
    """Authorities whose observations are read at all; the eligibility matrix then judges each
    for its own domain (a `single_observation` `user_fact` is injected, a `single_observation`
    `user_preference` is not)."""

    @property
    def shape(self) -> recall_store.Shape:
        return recall_store.Shape(self.per_term, self.lexical, self.around, self.recent)


Creation = Callable[[str], Awaitable[SessionFacts | None]]
"""A session's facts from the `session/created` in its log (None: the log has none)."""


class Recaller:
    def __init__(
        self,
        pool: PoolSource,
        settings: RecallSettings = RecallSettings(),
        semantic: SemanticIndex | None = None,
        clock: Clock = utc_now,
        creation: Creation | None = None,
    ) -> None:
        self._pool, self._settings, self._clock = pool, settings, clock
        self._creation = creation
        self._semantic = semantic or NoSemanticIndex()
        self._previous: OrderedDict[str, tuple[tuple[int, int], frozenset[str], frozenset[str]]]
        self._previous = OrderedDict()
        self._scopes: OrderedDict[str, tuple[float, str]] = OrderedDict()
        self._stats = StatsCache()

    async def recall(self, req: RecallRequest) -> dict[str, Any]:
        """`{text, count}`, explained: + `items` (what was injected) and `ranked` (the best
        candidates, injected or not); empty on any ledger failure."""
        if req.member is not None:
            return await self._member_recall(req, req.member)
        try:
            composition = await self._compose(req)
        except TavernError as exc:
            log.warning("recall_degraded", session_id=req.session_id, error=exc.message)
            return {"text": "", "count": 0, **({"items": [], "ranked": []} if req.explain else {})}
        if req.as_of is None:
            self._remember(req, composition.admitted_ids)
        return _reply(composition, req.explain)

    async def _member_recall(self, req: RecallRequest, member: str) -> dict[str, Any]:
        """The group chat's memory and the member's own, each in half the budget, headed by
        whose it is."""
        scope = memory_scope(
            chat_id=req.session_id,
            character_id=member,
            agent_id="main",
            reach="character",
            owner=req.owner,
        )
        half = replace(self._settings.composer, hot_tokens=self._settings.composer.hot_tokens // 2)
        try:
            parts = (await self._compose(req, None, half), await self._compose(req, scope, half))
        except TavernError as exc:
            log.warning("recall_degraded", session_id=req.session_id, error=exc.message)
            return {"text": "", "count": 0, **({"items": [], "ranked": []} if req.explain else {})}
        if req.as_of is None:
            self._remember(req, parts[0].admitted_ids | parts[1].admitted_ids)
        name = req.member_name or member
        headings = (GROUP_CHAT_HEADING, f"[{name}'s own memory]")
        return _labelled(
            [(h, _reply(c, req.explain)) for h, c in zip(headings, parts, strict=True)]
        )

    async def _compose(
        self, req: RecallRequest, scope: str | None = None, config: ComposerConfig | None = None
    ) -> Composition:
        # An as-of recall is the view of that moment: ranked for its time, with no carry-over
        # from what the live session was given at its last step.
        now = req.as_of or self._clock()
        async with connection(self._pool) as conn:
            scope = scope or await self._scope(conn, req.session_id)
            hits = await self._semantic_hits(scope, req.query)
            candidates, stats = await self._candidates(conn, scope, req, hits)
        query = Query(
            text=req.query,
            session_id=req.session_id,
            scope_id=scope,
            now=now,
            valid_at=req.as_of,
            previous_ids=self._previous_ids(req) if req.as_of is None else frozenset(),
            has_semantic=bool(hits),
            stats=stats,
            explain=req.explain,
        )
        return compose(candidates, query, config or self._settings.composer)

    async def _scope(self, conn: Conn, session_id: str) -> str:
        """The session's scope; a known one is cached (a session never changes chat)."""
        cached = self._scopes.get(session_id)
        if cached is not None and time.monotonic() - cached[0] < SCOPE_TTL_S:
            return cached[1]
        scope = await evidence_scope.known_scope(conn, session_id)
        if scope is None:
            # A new chat's first message often comes before ingestion stored its creation: the
            # scope its memory reach names is read from the log, as ingestion itself will.
            facts = await self._creation(session_id) if self._creation is not None else None
            if facts is None:
                return session_id  # not cached: its binding may arrive any moment
            scope = facts.scope
        self._scopes[session_id] = (time.monotonic(), scope)
        while len(self._scopes) > REMEMBERED_SESSIONS:
            self._scopes.popitem(last=False)
        return scope

    async def _candidates(
        self, conn: Conn, scope: str, req: RecallRequest, hits: Sequence[SemanticHit]
    ) -> tuple[list[Candidate], CorpusStats]:
        s = self._settings
        terms = query_terms(req.query)
        frequencies, documents = self._stats.known(scope, terms)
        q = recall_store.CandidateQuery(
            scope_id=scope,
            session_id=req.session_id,
            terms=terms,
            shape=s.shape,
            as_of=req.as_of,
            extra_ids=[h.evidence_id for h in hits],
            content_chars=content_chars(s.composer),
            known_frequencies=frequencies,
            known_documents=documents,
        )
        read = await recall_store.candidates(conn, q)
        self._stats.learn(scope, read.stats, fresh_documents=documents is None)
        found = read.found
        if hits:
            scores = {h.evidence_id: h.score for h in hits}
            found = [replace(c, semantic=scores.get(c.id, 0.0)) for c in found]
        if s.observations and req.as_of is None:
            found += await recall_store.observations(conn, scope, s.observation_authorities)
        return found, read.stats

    async def _semantic_hits(self, scope: str, query: str) -> Sequence[SemanticHit]:
        """The semantic channel fails open: slow or broken means no semantic scores."""
        try:
            async with asyncio.timeout(SEMANTIC_TIMEOUT_S):  # a deadline, not a task per recall
                return await self._semantic.search(scope, query, self._settings.recent)
        except Exception as exc:
            log.warning("semantic_channel_failed", error=repr(exc))
            return ()

    def _previous_ids(self, req: RecallRequest) -> frozenset[str]:
        found = self._previous.get(req.session_id)
        if found is None:
            return frozenset()
        key, before, last = found
        return before if key == (req.turn, req.step) else last

    def _remember(self, req: RecallRequest, admitted: frozenset[str]) -> None:
        """Hysteresis memory: the ids each session was given at its last step (bounded)."""
        key = (req.turn, req.step)
        found = self._previous.pop(req.session_id, None)
        before = frozenset() if found is None else (found[1] if found[0] == key else found[2])
        self._previous[req.session_id] = (key, before, admitted)
        while len(self._previous) > REMEMBERED_SESSIONS:
            self._previous.popitem(last=False)


class StatsCache:
    """Term statistics of recent recalls per scope, kept a while: counting a common term's
    postings or a big scope's rows on every recall would cost more than the rest of it, and
    BM25 barely moves when a count is a minute old."""

    def __init__(self, ttl_s: float = STATS_TTL_S, size: int = REMEMBERED_TERMS) -> None:
        self._ttl, self._size = ttl_s, size
        self._terms: OrderedDict[tuple[str, str], tuple[float, int]] = OrderedDict()
        self._documents: OrderedDict[str, tuple[float, int]] = OrderedDict()

    def known(self, scope: str, terms: Sequence[str]) -> tuple[dict[str, int], int | None]:
        now = time.monotonic()
        frequencies = {}
        for term in terms:
            found = self._terms.get((scope, term))
            if found is not None and now - found[0] < self._ttl:
                frequencies[term] = found[1]
        documents = self._documents.get(scope)
        fresh = documents is not None and now - documents[0] < SIZE_TTL_S
        return frequencies, documents[1] if fresh and documents is not None else None

    def learn(self, scope: str, stats: CorpusStats, *, fresh_documents: bool) -> None:
        """Keep what a read counted (known values come back unchanged and keep their age)."""
        now = time.monotonic()
        for term, frequency in stats.frequencies.items():
            known = self._terms.get((scope, term))
            if known is None or now - known[0] >= self._ttl:
                self._terms[(scope, term)] = (now, frequency)
                self._terms.move_to_end((scope, term))
        if fresh_documents:
            self._documents[scope] = (now, stats.documents)
            self._documents.move_to_end(scope)
        _trim(self._terms, self._size)
        _trim(self._documents, REMEMBERED_SESSIONS)


def _trim(cache: OrderedDict[Any, Any], size: int) -> None:
    while len(cache) > size:
        cache.popitem(last=False)


def content_chars(config: ComposerConfig) -> int:
    """Enough characters for the largest section to render any one item (0.3 token a char)."""
    largest = max(config.quota.values(), default=DEFAULT_SECTION_CAP)
    return min(8000, math.ceil(largest / 0.3) + 200)


def _labelled(parts: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """Replies of several scopes as one: each non-empty text under its heading; explained
    items say whose memory they are (`memory`)."""
    texts = [f"{heading}\n{reply['text']}" for heading, reply in parts if reply["text"]]
    found: dict[str, Any] = {"text": "\n".join(texts), "count": sum(r["count"] for _, r in parts)}
    for key in ("items", "ranked"):
        if all(key in reply for _, reply in parts):
            found[key] = [{**item, "memory": h} for h, reply in parts for item in reply[key]]
    return found


def _reply(composition: Composition, explain: bool) -> dict[str, Any]:
    reply: dict[str, Any] = {"text": render(composition.items), "count": len(composition.items)}
    if explain:
        admitted = composition.admitted_ids
        reply["items"] = [_explained(s) for s in composition.items]
        reply["ranked"] = [
            {**_explained(s), "injected": s.candidate.id in admitted}
            for s in composition.ranked[:EXPLAINED_RANKS]
        ]
    return reply


def _explained(s: Scored) -> dict[str, Any]:
    """Why an item was recalled: where it came from, on whose authority, how it ranked."""
    return {
        "evidence_id": s.candidate.id,
        "source_event_id": s.candidate.source_event_id,
        "session_id": s.candidate.session_id,
        "cross_session": s.cross_session,
        "source_class": s.candidate.source_class,
        "authority": s.candidate.authority,
        "claim_domain": s.candidate.claim_domain,
        "score": round(s.utility, 4),
        "section": s.section,
    }
