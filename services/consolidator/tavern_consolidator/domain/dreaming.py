"""Dreaming (acp.md §16): offline and deterministic, no model. Merge observations into clusters,
count their recurrence, plan a forget list that only marks. Writes only the candidate pool and the
run ledger, never observations; a human decision already in the pool survives a rerun."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from tavern_consolidator.domain.records import Evidence, Observation
from tavern_consolidator.domain.text import bigrams, jaccard

CLUSTER_JACCARD = 0.55
OCCURRENCE_MIN = 2
SESSION_MIN = 2
DAY_MIN = 2
ARCHIVE_DAYS = 90
REPRESENTATIVE_MAX_CHARS = 500
HUMAN_STATES = frozenset({"approved", "rejected"})
POOL_STATES = ("candidate", "observed", "consensus", "approved", "rejected")


@dataclass
class Cluster:
    claim_domain: str
    seed_subject: str
    members: list[Observation] = field(default_factory=list)
    grams: set[str] = field(default_factory=set)

    def accepts(self, obs: Observation, grams: set[str], threshold: float) -> bool:
        if obs.claim_domain != self.claim_domain:
            return False
        same_subject = bool(self.seed_subject) and self.seed_subject == obs.subject
        return same_subject or jaccard(grams, self.grams) >= threshold


@dataclass(frozen=True)
class PoolEntry:
    """One row of the candidate pool (`consolidator.candidate_memory`)."""

    id: str
    scope_id: str
    state: str
    claim_domain: str
    subject: str
    text: str
    observation_ids: tuple[str, ...]
    evidence_ids: tuple[str, ...]
    sessions: tuple[str, ...]
    days: int
    occurrences: int
    first_seen: datetime
    last_seen: datetime


@dataclass(frozen=True)
class ForgetPlan:
    """Stale rows to mark cold (never deleted)."""

    cutoff: datetime
    observations: tuple[str, ...]
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class DreamPlan:
    scope_id: str
    scanned: int
    entries: tuple[PoolEntry, ...]
    forget: ForgetPlan

    @property
    def consensus(self) -> int:
        return sum(1 for e in self.entries if e.state == "consensus")


def pool_id(scope_id: str, claim_domain: str, subject: str, observation_ids: Iterable[str]) -> str:
    """`cm_` + 24 hex; the order of the members does not matter."""
    members = ",".join(sorted(observation_ids))
    digest = hashlib.sha256(f"{scope_id}|{claim_domain}|{subject}|{members}".encode()).hexdigest()
    return "cm_" + digest[:24]


def cluster(
    observations: Iterable[Observation], threshold: float = CLUSTER_JACCARD
) -> list[Cluster]:
    """Active observations, oldest first, each joining the first cluster of its claim domain with
    the same subject or bigram Jaccard >= threshold; cluster bigrams accumulate as a union."""
    clusters: list[Cluster] = []
    active = sorted(
        (o for o in observations if o.state == "active"), key=lambda o: (o.observed_at, o.id)
    )
    for obs in active:
        grams = bigrams(obs.text)
        home = next((c for c in clusters if c.accepts(obs, grams, threshold)), None)
        if home is None:
            home = Cluster(obs.claim_domain, obs.subject)
            clusters.append(home)
        home.members.append(obs)
        home.grams |= grams
    return clusters


def representative(members: Sequence[Observation]) -> tuple[str, str]:
    """Subject = the most common (ties: smallest); text = the longest (ties: smallest id)."""
    counts = Counter(m.subject for m in members)
    top = max(counts.values())
    subject = min(s for s, n in counts.items() if n == top)
    longest = min(members, key=lambda m: (-len(m.text), m.id))
    return subject, longest.text[:REPRESENTATIVE_MAX_CHARS]


def decide_state(occurrences: int, sessions: int, days: int) -> str:
    """Recurrence across sessions or natural days makes a consensus."""
    if occurrences < OCCURRENCE_MIN:
        return "candidate"
    if sessions >= SESSION_MIN or days >= DAY_MIN:
        return "consensus"
    return "candidate"


def entry_of(scope_id: str, c: Cluster, evidence: Mapping[str, Evidence]) -> PoolEntry:
    subject, text = representative(c.members)
    evidence_ids = tuple(sorted({e for m in c.members for e in m.evidence_ids}))
    known = [evidence[e] for e in evidence_ids if e in evidence]
    sessions = tuple(sorted({e.session_id for e in known if e.session_id}))
    times = [e.observed_at for e in known] or [m.observed_at for m in c.members]
    days = len({t.date() for t in times})
    member_ids = tuple(m.id for m in c.members)
    return PoolEntry(
        id=pool_id(scope_id, c.claim_domain, subject, member_ids),
        scope_id=scope_id,
        state=decide_state(len(c.members), len(sessions), days),
        claim_domain=c.claim_domain,
        subject=subject,
        text=text,
        observation_ids=member_ids,
        evidence_ids=evidence_ids,
        sessions=sessions,
        days=days,
        occurrences=len(c.members),
        first_seen=min(times),
        last_seen=max(times),
    )


def plan_forget(
    observations: Iterable[Observation],
    evidence: Iterable[Evidence],
    now: datetime,
    ttl_days: int = ARCHIVE_DAYS,
) -> ForgetPlan:
    """Superseded observations and quarantined evidence older than `ttl_days`."""
    cutoff = now - timedelta(days=ttl_days)
    stale_obs = sorted(
        o.id for o in observations if o.state == "superseded" and o.observed_at < cutoff
    )
    stale_ev = sorted(
        e.id
        for e in evidence
        if e.state == "quarantined" and (e.state_changed_at or e.observed_at) < cutoff
    )
    return ForgetPlan(cutoff, tuple(stale_obs), tuple(stale_ev))


def dream(
    scope_id: str,
    observations: Sequence[Observation],
    evidence: Sequence[Evidence],
    now: datetime,
    ttl_days: int = ARCHIVE_DAYS,
) -> DreamPlan:
    by_id = {e.id: e for e in evidence}
    entries = tuple(entry_of(scope_id, c, by_id) for c in cluster(observations))
    scanned = sum(1 for o in observations if o.state == "active")
    return DreamPlan(scope_id, scanned, entries, plan_forget(observations, evidence, now, ttl_days))


def keep_decisions(entries: Iterable[PoolEntry], stored: Mapping[str, str]) -> list[PoolEntry]:
    """A pool row a human approved or rejected keeps that state; only its statistics change."""
    return [
        replace(e, state=stored[e.id]) if stored.get(e.id) in HUMAN_STATES else e for e in entries
    ]
