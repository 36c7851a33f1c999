"""The JSON shapes store replies return (snake_case; the loop's tools rename for the model)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tavern_ledger.domain.memory import Hit, MemoryRecord, SearchResult
from tavern_ledger.domain.variables import json_type, summarize


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def memory_view(record: MemoryRecord) -> dict[str, Any]:
    """A full record; a quarantined one is shown without its content (it is not data to use)."""
    view: dict[str, Any] = {
        "id": record.id,
        "scope": record.scope,
        "kind": record.kind,
        "content": record.content if record.state == "active" else None,
        "tags": list(record.tags),
        "importance": record.importance,
        "confidence": record.confidence,
        "claim_domain": record.claim_domain,
        "state": record.state,
        "revision": record.revision,
        "source": record.source,
        "created_at": iso(record.created_at),
        "updated_at": iso(record.updated_at),
        "expires_at": iso(record.expires_at),
    }
    if record.gate_reasons:
        view["gate_reasons"] = list(record.gate_reasons)
    return view


def change_view(record: MemoryRecord) -> dict[str, Any]:
    """What a write or update answers: where it went, its revision and the gate's verdict."""
    return {
        "id": record.id,
        "scope": record.scope,
        "state": record.state,
        "revision": record.revision,
        "source": record.source,
        "gate_reasons": list(record.gate_reasons),
        "searchable": record.state == "active",
    }


def hit_view(hit: Hit) -> dict[str, Any]:
    r = hit.record
    return {
        "id": r.id,
        "scope": r.scope,
        "kind": r.kind,
        "content": hit.content,
        "tags": list(r.tags),
        "importance": r.importance,
        "confidence": r.confidence,
        "score": hit.score,
        "revision": r.revision,
        "source": r.source,
        "updated_at": iso(r.updated_at),
        "truncated": hit.truncated,
    }


def search_view(result: SearchResult) -> dict[str, Any]:
    return {
        "hits": [hit_view(h) for h in result.hits],
        "source_count": result.source_count,
        "truncated": result.truncated,
    }


def variable_view(
    name: str, value: Any, revision: int, updated_at: datetime | None
) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "type": json_type(value),
        "revision": revision,
        "updated_at": iso(updated_at),
    }


def listing_view(
    name: str, value: Any, revision: int, size: int, summary_chars: int
) -> dict[str, Any]:
    return {
        "name": name,
        "type": json_type(value),
        "revision": revision,
        "bytes": size,
        "summary": summarize(value, summary_chars),
    }
