"""Memory rules: content and tag normalisation, gate outcomes, revisions, search ranking.

Ranking follows DSH's store: score = lexical x 100 + importance x 10 + confidence x 5 +
recency (1 / (1 + age in days)), then the newest, then the id; whole records are added under a
token budget and the first one that does not fit is cut and marked truncated.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal

from tavern_ledger.domain.store_limits import StoreLimits
from tavern_ledger.toolcalls.errors import Blocked, Invalid, RevisionConflict, TooLarge
from tavern_runtime.tokens import estimate_tokens

MemoryState = Literal["active", "quarantined", "forgotten"]
GateAction = Literal["allow", "redact", "quarantine", "block"]
_WORD = re.compile(r"[^\W_]+")
DAY_S = 86400.0


@dataclass(frozen=True)
class GateOutcome:
    """The write gate's verdict on a text, as the stores use it."""

    action: GateAction
    reasons: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class MemoryRecord:
    id: str
    scope: str
    scope_id: str
    kind: str
    content: str
    tags: tuple[str, ...]
    importance: float
    confidence: float
    claim_domain: str
    source: dict[str, Any]
    state: MemoryState
    gate_reasons: tuple[str, ...]
    revision: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    forgotten_at: datetime | None = None

    def visible(self, now: datetime) -> bool:
        """Active and not expired: only these are read back or searched."""
        return self.state == "active" and (self.expires_at is None or self.expires_at > now)


@dataclass(frozen=True)
class Hit:
    record: MemoryRecord
    score: float
    content: str
    truncated: bool


@dataclass(frozen=True)
class SearchResult:
    hits: tuple[Hit, ...]
    source_count: int
    truncated: bool


# --- writing ------------------------------------------------------------------------------------


def check_content(content: str, limits: StoreLimits) -> str:
    """Non-blank text without NUL, at most `max_content_chars` characters."""
    text = content.strip()
    if not text:
        raise Invalid("memory content must not be blank")
    if "\x00" in text:
        raise Invalid("memory content may not contain NUL characters")
    if len(text) > limits.max_content_chars:
        raise TooLarge(
            f"memory content is {len(text)} characters; the limit is {limits.max_content_chars}"
        )
    return text


def normalize_tags(tags: Sequence[str], limits: StoreLimits) -> tuple[str, ...]:
    """Trimmed, lower-cased, cut to `max_tag_chars`, de-duplicated and sorted."""
    cleaned = {t.strip().lower()[: limits.max_tag_chars] for t in tags}
    if "" in cleaned or any("\x00" in t for t in cleaned):
        raise Invalid("tags must be non-blank text")
    if len(cleaned) > limits.max_tags:
        raise TooLarge(f"{len(cleaned)} tags; the limit is {limits.max_tags}")
    return tuple(sorted(cleaned))


def expiry(now: datetime, ttl_s: int | None, limits: StoreLimits) -> datetime | None:
    if ttl_s is None:
        return None
    if ttl_s > limits.max_ttl_s:
        raise Invalid(f"ttl_s may be at most {limits.max_ttl_s} seconds")
    return now + timedelta(seconds=ttl_s)


def gated_state(outcome: GateOutcome) -> MemoryState:
    """allow/redact store it active, quarantine stores it hidden, block stores nothing."""
    if outcome.action == "block":
        reasons = "; ".join(outcome.reasons) or "refused by the write gate"
        raise Blocked(f"memory not stored: {reasons}", reasons=list(outcome.reasons))
    return "quarantined" if outcome.action == "quarantine" else "active"


def check_revision(record: MemoryRecord, expected: int | None) -> None:
    """A stale expectation is a conflict naming the current revision, never an overwrite."""
    if expected is not None and expected != record.revision:
        raise RevisionConflict(
            f"memory {record.id!r} is at revision {record.revision}, not {expected}: "
            "read it again and retry",
            current_revision=record.revision,
        )


@dataclass(frozen=True)
class Edit:
    """The fields an update may change; None keeps the stored value (`ttl_s` 0 clears it)."""

    tags: tuple[str, ...] | None = None
    importance: float | None = None
    confidence: float | None = None
    ttl_s: int | None = None
    source: dict[str, Any] | None = None


def edited(
    record: MemoryRecord,
    edit: Edit,
    gated: tuple[GateOutcome, str] | None,
    now: datetime,
    limits: StoreLimits,
) -> MemoryRecord:
    """The next revision of `record`; `gated` is the gate's verdict on new content and its
    claim domain (None when neither changed)."""
    record = _regated(record, gated) if gated is not None else record
    return replace(
        record,
        tags=normalize_tags(edit.tags, limits) if edit.tags is not None else record.tags,
        importance=_keep(edit.importance, record.importance),
        confidence=_keep(edit.confidence, record.confidence),
        expires_at=_expiry_after_edit(record, edit.ttl_s, now, limits),
        source=edit.source if edit.source is not None else record.source,
        revision=record.revision + 1,
        updated_at=now,
    )


def _regated(record: MemoryRecord, gated: tuple[GateOutcome, str]) -> MemoryRecord:
    outcome, claim_domain = gated
    state = gated_state(outcome)
    return replace(
        record,
        content=outcome.text,
        claim_domain=claim_domain,
        state=state,
        gate_reasons=outcome.reasons,
    )


def _keep(value: float | None, current: float) -> float:
    return current if value is None else value


def _expiry_after_edit(
    record: MemoryRecord, ttl_s: int | None, now: datetime, limits: StoreLimits
) -> datetime | None:
    if ttl_s is None:
        return record.expires_at
    return None if ttl_s == 0 else expiry(now, ttl_s, limits)


def forgotten(record: MemoryRecord, now: datetime) -> MemoryRecord:
    return replace(
        record, state="forgotten", forgotten_at=now, updated_at=now, revision=record.revision + 1
    )


# --- searching ----------------------------------------------------------------------------------


def tokens(text: str) -> tuple[str, ...]:
    """Unique lower-case runs of letters and digits, in order of appearance."""
    return tuple(dict.fromkeys(_WORD.findall(text.lower())))


def like_patterns(words: Sequence[str]) -> list[str]:
    """`LIKE` patterns (escape `\\`) that preselect records containing any of `words`."""
    return [f"%{_escape_like(w)}%" for w in words]


def _escape_like(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def score(record: MemoryRecord, words: Sequence[str], now: datetime) -> float:
    haystack = f"{record.content}\n{' '.join(record.tags)}".lower()
    lexical = sum(w in haystack for w in words) / len(words) if words else 0.0
    age_days = max(0.0, (now - record.updated_at).total_seconds()) / DAY_S
    recency = 1.0 / (1.0 + age_days)
    raw = lexical * 100 + record.importance * 10 + record.confidence * 5 + recency
    return round(raw, 4)


def approximate_tokens(text: str) -> int:
    return max(1, estimate_tokens(text))


def rank(
    records: Sequence[MemoryRecord],
    words: Sequence[str],
    now: datetime,
    *,
    limit: int,
    max_tokens: int,
) -> SearchResult:
    """The best `limit` visible records within `max_tokens`; `truncated` when anything was
    left out or cut."""
    visible = [r for r in records if r.visible(now)]
    scored = sorted(
        ((score(r, words, now), r) for r in visible),
        key=lambda pair: (-pair[0], -pair[1].updated_at.timestamp(), pair[1].id),
    )
    hits = _within_budget(scored[:limit], max_tokens)
    cut = any(h.truncated for h in hits)
    return SearchResult(tuple(hits), len(visible), cut or len(hits) < len(visible))


def _within_budget(scored: Sequence[tuple[float, MemoryRecord]], budget: int) -> list[Hit]:
    hits: list[Hit] = []
    for value, record in scored:
        cost = approximate_tokens(record.content)
        if cost <= budget:
            hits.append(Hit(record, value, record.content, False))
            budget -= cost
            continue
        head = record.content[: budget * 4].rstrip()
        if head:
            hits.append(Hit(record, value, head, True))
        break
    return hits
