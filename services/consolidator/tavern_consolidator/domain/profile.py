"""The user profile (acp.md §13): built from observations at read time, never stored. Stable
facts and preferences, each weighted by support, recurrence and human approval (a ranking signal;
authority is never touched) and traceable observation -> evidence -> session event."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tavern_consolidator.domain.dreaming import PoolEntry
from tavern_consolidator.domain.records import Evidence, Observation

PROFILE_ARRAYS = (
    "stableFacts",
    "preferences",
    "recentState",
    "interactionPatterns",
    "inferredTraits",
)
ARRAY_OF_DOMAIN = {"user_fact": "stableFacts", "user_preference": "preferences"}
BASE_WEIGHT = 0.6
MAX_WEIGHT = 0.95


@dataclass(frozen=True)
class Support:
    """What the candidate pool knows of an observation: days, sessions, human approval."""

    days: int = 0
    sessions: int = 0
    confirmed: bool = False


@dataclass(frozen=True)
class ProfileEntry:
    observation: Observation
    weight: float
    signals: dict[str, Any]
    trace: tuple[dict[str, Any], ...]


@dataclass(frozen=True)
class Profile:
    subject_id: str
    arrays: dict[str, list[ProfileEntry]] = field(default_factory=dict)

    @property
    def source_version(self) -> int:
        return sum(len(v) for v in self.arrays.values())


def weight(evidence_count: int, days: int, confirmed: bool) -> float:
    """clamp(0.6 + 0.08*min(ev-1,4) + 0.08*min(days-1,3) + 0.12*approved, 0, 0.95)."""
    raw = (
        BASE_WEIGHT
        + 0.08 * min(max(0, evidence_count - 1), 4)
        + 0.08 * min(max(0, days - 1), 3)
        + (0.12 if confirmed else 0.0)
    )
    return min(round(raw, 3), MAX_WEIGHT)


def support_of(pool: Iterable[PoolEntry]) -> dict[str, Support]:
    """Per observation: the largest days and sessions of any cluster holding it; confirmed if
    any such cluster was approved."""
    found: dict[str, Support] = {}
    for entry in pool:
        for oid in entry.observation_ids:
            old = found.get(oid, Support())
            found[oid] = Support(
                max(old.days, entry.days),
                max(old.sessions, len(entry.sessions)),
                old.confirmed or entry.state == "approved",
            )
    return found


def trace(obs: Observation, evidence: Mapping[str, Evidence]) -> tuple[dict[str, Any], ...]:
    """observation -> evidence -> the session event it was ingested from."""
    rows = []
    for eid in obs.evidence_ids:
        e = evidence.get(eid)
        origin = {"session_id": e.session_id, "seq": e.seq, "event_id": e.event_id} if e else None
        rows.append({"evidence_id": eid, "origin": origin})
    return tuple(rows)


def build(
    subject_id: str,
    observations: Sequence[Observation],
    evidence: Mapping[str, Evidence],
    support: Mapping[str, Support],
) -> Profile:
    arrays: dict[str, list[ProfileEntry]] = {name: [] for name in PROFILE_ARRAYS}
    rows = [o for o in observations if o.state == "active" and o.claim_domain in ARRAY_OF_DOMAIN]
    for obs in sorted(rows, key=lambda o: (o.observed_at, o.id)):
        s = support.get(obs.id, Support())
        signals = {
            "evidenceCount": len(obs.evidence_ids),
            "days": s.days,
            "sessions": s.sessions,
            "confirmed": s.confirmed,
        }
        entry = ProfileEntry(
            obs, weight(len(obs.evidence_ids), s.days, s.confirmed), signals, trace(obs, evidence)
        )
        arrays[ARRAY_OF_DOMAIN[obs.claim_domain]].append(entry)
    return Profile(subject_id, arrays)


def as_json(profile: Profile) -> dict[str, Any]:
    """The reply shape: arrays of refs, plus recall candidates for the `user_model` section."""
    arrays = {name: [_ref(e) for e in entries] for name, entries in profile.arrays.items()}
    candidates = [
        _candidate(e, name)
        for name, entries in profile.arrays.items()
        for e in entries
        if e.observation.text
    ]
    return {
        "subject_id": profile.subject_id,
        "source_version": profile.source_version,
        **arrays,
        "candidates": candidates,
    }


def _ref(e: ProfileEntry) -> dict[str, Any]:
    o = e.observation
    return {
        "observation_id": o.id,
        "weight": e.weight,
        "signals": e.signals,
        "subject": o.subject,
        "predicate": o.predicate,
        "claim_domain": o.claim_domain,
        "text": o.text,
        "authority": o.authority or "single_observation",
        "evidence_ids": list(o.evidence_ids),
        "observed_at": o.observed_at.isoformat(),
        "trace": list(e.trace),
    }


def _candidate(e: ProfileEntry, array: str) -> dict[str, Any]:
    o = e.observation
    return {
        "id": o.id,
        "content": f"{o.subject} {o.predicate}: {o.text}",
        "section": "user_model",
        "claim_domain": o.claim_domain,
        "authority": o.authority or "single_observation",
        "confidence": e.weight,
        "evidence_ids": list(o.evidence_ids),
        "profile_array": array,
    }
