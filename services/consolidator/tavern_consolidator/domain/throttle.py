"""When a scope distils (acp.md §12.1-§12.3): thresholds, the daily cap, the pause after a failed
batch, which evidence is digestible, and where the watermark moves after a successful batch."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from tavern_consolidator.domain.records import Evidence
from tavern_consolidator.domain.text import is_ack_text
from tavern_consolidator.domain.vocabulary import AGENT_AUTHORITIES

SKIP_EXTERNAL_TOOL = True
SKIP_AGENT_EXPERIENCE = True
SKIP_ACK_ONLY = True


@dataclass(frozen=True)
class Thresholds:
    min_evidence: int = 10
    min_turns: int = 5
    max_batch: int = 40
    daily_runs: int = 24


@dataclass(frozen=True)
class ScopeState:
    """A scope's distillation bookkeeping as stored."""

    scope_id: str
    watermark_at: datetime | None = None
    watermark_id: str = ""
    run_day: date | None = None
    run_count: int = 0
    fail_count: int = 0
    retry_at: datetime | None = None

    @property
    def watermark(self) -> tuple[datetime | None, str]:
        return self.watermark_at, self.watermark_id


def digestible(authority: str, claim_domain: str, text: str) -> bool:
    """Whether distillation reads this evidence: not tool output, not the agent's own
    experience notes, not a bare acknowledgement (acp.md §12.2)."""
    if SKIP_EXTERNAL_TOOL and authority == "external_information":
        return False
    if SKIP_AGENT_EXPERIENCE and authority in AGENT_AUTHORITIES and claim_domain == "experience":
        return False
    return not (SKIP_ACK_ONLY and authority == "user_explicit" and is_ack_text(text))


def due(undigested: int, turns: int, t: Thresholds) -> str | None:
    """Why a batch should run now (`evidence` or `turns`), or None."""
    if undigested >= t.min_evidence:
        return "evidence"
    if turns >= t.min_turns:
        return "turns"
    return None


def runs_today(state: ScopeState, today: date) -> int:
    return state.run_count if state.run_day == today else 0


def capped(state: ScopeState, today: date, t: Thresholds) -> bool:
    """The scope spent its batches for this UTC day."""
    return runs_today(state, today) >= t.daily_runs


def paused(state: ScopeState, now: datetime) -> bool:
    """A failed batch waits before it is retried (with the same items)."""
    return state.retry_at is not None and now < state.retry_at


def retry_at(fail_count: int, now: datetime, base_s: float, max_s: float) -> datetime:
    """Exponential: base, 2*base, 4*base ... up to max after the n-th consecutive failure."""
    delay = min(max_s, base_s * 2.0 ** max(0, fail_count - 1))
    return now + timedelta(seconds=delay)


def watermark_after(batch: Sequence[Evidence]) -> tuple[datetime, str]:
    """The batch's latest observed time (and that row's id, for ties): never `now`."""
    last = max(batch, key=lambda e: (e.observed_at, e.id))
    return last.observed_at, last.id


@dataclass(frozen=True)
class Position:
    """Where one evidence copy stands against its scope's watermark."""

    evidence_id: str
    state: str
    digestible: bool
    observed_at: datetime
    watermark_at: datetime | None
    watermark_id: str
    digested: bool = False
    """A successful batch took it (marked on the copy)."""


def verdict(p: Position, *, digested: bool) -> str:
    """What happened to one evidence: digested (a batch succeeded with it), pending (no batch
    took it yet, whatever its time against the watermark), or skipped, and why (the audit's
    "processed" vs "skipped")."""
    if digested or p.digested:
        return "digested"
    if p.state != "active":
        return f"skipped: evidence is {p.state}"
    if not p.digestible:
        return "skipped: not digestible (tool output, agent experience or an acknowledgement)"
    return "pending"
