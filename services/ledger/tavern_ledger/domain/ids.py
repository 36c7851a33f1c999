"""Content-derived ids (acp.md §2.10), bit-exact with ACP: the same source and content always give
the same id, so a redelivered or replayed event, or a re-import, inserts nothing twice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

_JS_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def js_json(value: Any) -> str:
    """JSON as JavaScript's `JSON.stringify` writes it: no whitespace, keys in insertion order,
    non-ASCII characters raw."""
    return _JS_JSON.encode(value)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_hash(content: str) -> str:
    return sha256_hex(content)


def evidence_id(source_ref: Mapping[str, Any], hash_of_content: str) -> str:
    """`ev_` + sha256(JSON(sourceRef) + '|' + contentHash)[:24]."""
    return evidence_id_of_json(js_json(dict(source_ref)), hash_of_content)


def evidence_id_of_json(source_ref_json: str, hash_of_content: str) -> str:
    """`evidence_id` of a sourceRef already written as `js_json`."""
    return "ev_" + sha256_hex(source_ref_json + "|" + hash_of_content)[:24]


def session_source_ref(session_id: str, seq: int) -> dict[str, str]:
    """The sourceRef of evidence ingested from a session event: `{sessionEventId: sid:seq}`."""
    return {"sessionEventId": f"{session_id}:{seq}"}


def observation_id(
    scope_id: str,
    subject: str,
    predicate: str,
    claim_domain: str,
    text: str,
    evidence_ids: Sequence[str],
) -> str:
    """`obs_` + sha256(scope|subject|predicate|domain|text|JSON(evidenceIds))[:24]."""
    joined = "|".join(
        [
            scope_id,
            subject.strip(),
            predicate.strip(),
            claim_domain,
            text,
            js_json([str(e) for e in evidence_ids]),
        ]
    )
    return "obs_" + sha256_hex(joined)[:24]


def rule_id(scope_id: str, domain: str, text: str) -> str:
    return "rule_" + sha256_hex(f"{scope_id}|{domain}|{text}")[:24]


def candidate_memory_id(
    scope_id: str, claim_domain: str, subject: str, observation_ids: Iterable[str]
) -> str:
    """Member order does not matter: the observation ids are sorted."""
    members = ",".join(sorted(observation_ids))
    return "cm_" + sha256_hex(f"{scope_id}|{claim_domain}|{subject}|{members}")[:24]


def session_of_source_ref(ref: Mapping[str, Any]) -> str:
    """acp.md §3.3: sessionId, else conversationId, else sessionEventId before its last `:`."""
    for key in ("sessionId", "session_id", "conversationId", "conversation_id"):
        value = ref.get(key)
        if isinstance(value, str) and value:
            return value
    event = ref.get("sessionEventId") or ref.get("session_event_id")
    if isinstance(event, str) and event:
        cut = event.rfind(":")
        return event[:cut] if cut > 0 else event
    return ""
