"""JSONL export and import (acp.md §11, EXPORT_VERSION 1): one `{"kind", "version", "ts", "data"}`
object per line, streams `evidence`, `observation`, `candidate`, `audit`. Import validates each
line on its own; a bad line is reported and the rest goes on.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tavern_ledger.domain.ids import content_hash, js_json
from tavern_ledger.domain.records import EvidenceRow, ObservationRow
from tavern_ledger.domain.text import estimate_tokens
from tavern_ledger.domain.vocabulary import (
    CLAIM_DOMAINS,
    EVIDENCE_STATES,
    SENSITIVITIES,
    consistency_error,
    metadata_error,
)

EXPORT_VERSION = 1
STREAMS = ("evidence", "observation", "candidate", "audit")
MAX_CONTENT_CHARS = 8000
CANDIDATE_STATES = ("proposed", "promoted", "rejected", "superseded", "rolled_back")
CANDIDATE_TRANSITIONS: Mapping[str, tuple[str, str]] = {
    # event -> (from state, to state); `create` starts at proposed
    "promote": ("proposed", "promoted"),
    "reject": ("proposed", "rejected"),
    "supersede": ("proposed", "superseded"),
    "rollback": ("promoted", "rolled_back"),
}


class LineInvalid(ValueError):
    pass


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def line(kind: str, data: Mapping[str, Any], ts: int) -> str:
    return json.dumps(
        {"kind": kind, "version": EXPORT_VERSION, "ts": ts, "data": data},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def evidence_data(row: EvidenceRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "scopeId": row.scope_id,
        "sessionId": row.session_id,
        "agentKey": row.agent_key,
        "sessionType": row.session_type,
        "sourceClass": row.source_class,
        "authority": row.authority,
        "confidence": row.confidence,
        "durability": row.durability,
        "sensitivity": row.sensitivity,
        "claimDomain": row.claim_domain,
        "content": row.content,
        "contentHash": row.content_hash,
        "sourceRef": json.loads(row.source_ref or "{}"),
        "sourceEventId": row.source_event_id,
        "sourceLabel": row.source_label,
        "ingest": row.ingest,
        "flags": list(row.flags),
        "observedAt": iso(row.observed_at),
        "validFrom": iso(row.valid_from),
        "validUntil": iso(row.valid_until),
        "state": row.state,
        "supersedes": list(row.supersedes),
        "metadata": row.metadata,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
    }


def observation_data(row: ObservationRow) -> dict[str, Any]:
    return {
        "id": row.id,
        "scopeId": row.scope_id,
        "subject": row.subject,
        "predicate": row.predicate,
        "claimDomain": row.claim_domain,
        "authority": row.authority,
        "text": row.text,
        "evidenceIds": list(row.evidence_ids),
        "supersedes": list(row.supersedes),
        "state": row.state,
        "observedAt": iso(row.observed_at),
        "createdAt": iso(row.created_at),
    }


@dataclass(frozen=True)
class ParsedLine:
    kind: str
    data: dict[str, Any]


def parse_line(text: str) -> ParsedLine:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise LineInvalid(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LineInvalid("line must be a JSON object")
    if value.get("version") != EXPORT_VERSION:
        raise LineInvalid(f"unsupported version {value.get('version')!r}")
    kind, data = value.get("kind"), value.get("data")
    if kind not in STREAMS:
        raise LineInvalid(f"unknown kind {kind!r}")
    if not isinstance(data, dict):
        raise LineInvalid("data must be an object")
    return ParsedLine(str(kind), data)


def _text(data: Mapping[str, Any], key: str, *, required: bool = True) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value):
        raise LineInvalid(f"{key} must be a non-empty string")
    return value


def _time(data: Mapping[str, Any], key: str, *, required: bool = False) -> datetime | None:
    value = data.get(key)
    if value is None and not required:
        return None
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        raise LineInvalid(f"{key} must be an ISO-8601 time") from None
    if parsed.tzinfo is None:
        raise LineInvalid(f"{key} must carry a time zone")
    return parsed


def _required_time(data: Mapping[str, Any], key: str) -> datetime:
    found = _time(data, key, required=True)
    if found is None:
        raise LineInvalid(f"{key} is required")
    return found


def _unit(data: Mapping[str, Any], key: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise LineInvalid(f"{key} must be a number in [0, 1]")
    return float(value)


def _one_of(data: Mapping[str, Any], key: str, allowed: tuple[str, ...]) -> str:
    value = data.get(key)
    if value not in allowed:
        raise LineInvalid(f"{key} {value!r} is not one of {', '.join(allowed)}")
    return str(value)


def _strings(data: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise LineInvalid(f"{key} must be a list of strings")
    return tuple(value)


def parse_evidence(data: Mapping[str, Any]) -> EvidenceRow:
    """An imported evidence row, validated (the id is kept, the content hash checked)."""
    content = _text(data, "content")
    if len(content) > MAX_CONTENT_CHARS:
        raise LineInvalid(f"content over {MAX_CONTENT_CHARS} characters")
    digest = _text(data, "contentHash")
    state = _one_of(data, "state", EVIDENCE_STATES)
    if len(digest) != 64 or (state != "redacted" and digest != content_hash(content)):
        raise LineInvalid("contentHash does not match the content")
    source_class, authority = _text(data, "sourceClass"), _text(data, "authority")
    problem = consistency_error(source_class, authority)
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise LineInvalid("metadata must be an object")
    problem = problem or metadata_error(metadata)
    if problem:
        raise LineInvalid(problem)
    source_ref = data.get("sourceRef") or {}
    if not isinstance(source_ref, dict):
        raise LineInvalid("sourceRef must be an object")
    return EvidenceRow(
        id=_text(data, "id"),
        scope_id=_text(data, "scopeId"),
        session_id=_text(data, "sessionId", required=False),
        agent_key=_text(data, "agentKey", required=False),
        session_type=_one_of(data, "sessionType", ("root", "subagent", "fork")),
        source_class=source_class,
        authority=authority,
        confidence=_unit(data, "confidence"),
        durability=_unit(data, "durability"),
        sensitivity=_one_of(data, "sensitivity", SENSITIVITIES),
        claim_domain=_one_of(data, "claimDomain", CLAIM_DOMAINS),
        content=content,
        content_hash=digest,
        source_ref=js_json(source_ref),
        source_event_id=data.get("sourceEventId") or None,
        source_label=_text(data, "sourceLabel", required=False),
        ingest=_text(data, "ingest", required=False),
        flags=_strings(data, "flags"),
        tokens=estimate_tokens(content),
        observed_at=_required_time(data, "observedAt"),
        valid_from=_time(data, "validFrom"),
        valid_until=_time(data, "validUntil"),
        state=state,
        supersedes=_strings(data, "supersedes"),
        metadata=dict(metadata),
        created_at=_time(data, "createdAt"),
        updated_at=_time(data, "updatedAt"),
    )


def parse_observation(data: Mapping[str, Any]) -> ObservationRow:
    text = _text(data, "text")
    if len(text) > 500:
        raise LineInvalid("observation text over 500 characters")
    authority = data.get("authority")
    if authority is not None and consistency_error("agent_authored", str(authority)):
        raise LineInvalid(f"unknown authority {authority!r}")
    return ObservationRow(
        id=_text(data, "id"),
        scope_id=_text(data, "scopeId"),
        subject=_text(data, "subject"),
        predicate=_text(data, "predicate"),
        claim_domain=_one_of(data, "claimDomain", CLAIM_DOMAINS),
        authority=str(authority) if authority is not None else None,
        text=text,
        evidence_ids=_strings(data, "evidenceIds"),
        supersedes=_strings(data, "supersedes"),
        state=_one_of(data, "state", ("active", "superseded", "quarantined")),
        observed_at=_required_time(data, "observedAt"),
        created_at=_time(data, "createdAt"),
    )


@dataclass(frozen=True)
class CandidateImport:
    data: dict[str, Any]
    events: tuple[dict[str, Any], ...]


def parse_candidate(data: Mapping[str, Any]) -> CandidateImport:
    """A candidate and its event log; the events must replay to the row's state (a missing
    `create` event is synthesised)."""
    _text(data, "id")
    _text(data, "scopeId")
    _strings(data, "evidenceIds")
    state = _one_of(data, "state", CANDIDATE_STATES)
    _one_of(data, "domain", CLAIM_DOMAINS)
    events = data.get("events") or []
    if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
        raise LineInvalid("events must be a list of objects")
    if not any(e.get("event") == "create" for e in events):
        events = [{"event": "create", "reason": "", "actor": "system", "ts": None}, *events]
    replayed = replay_state(events)
    if replayed != state:
        raise LineInvalid(
            f"candidate '{data['id']}' events replay to state '{replayed}' but row state is "
            f"'{state}'"
        )
    return CandidateImport(dict(data), tuple(events))


def replay_state(events: list[dict[str, Any]]) -> str:
    state = ""
    for event in events:
        name = event.get("event")
        if name == "create":
            state = "proposed"
        elif name in CANDIDATE_TRANSITIONS and CANDIDATE_TRANSITIONS[str(name)][0] == state:
            state = CANDIDATE_TRANSITIONS[str(name)][1]
    return state


def parse_audit(data: Mapping[str, Any]) -> dict[str, Any]:
    audit_id = data.get("id")
    if isinstance(audit_id, bool) or not isinstance(audit_id, int) or audit_id < 1:
        raise LineInvalid("audit id must be a positive integer")
    _text(data, "op")
    _text(data, "scopeId")
    _text(data, "actor")
    return dict(data)
