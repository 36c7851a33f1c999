"""History search: request bounds, matching rules and the shaping of hits under a budget.

A message matches when it holds every query token (see `text`); the current chat is searched
newest first, then each allowed parent chat up to the fork point, nearest parent first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from tavern_events.rpc.projector import HistoryRequest
from tavern_projector.domain import text
from tavern_projector.errors import BadRequest

PARENT_DEPTH_MAX = 4
SCAN_CAP = 500
"""At most this many matching rows are read per search (the count is then a lower bound)."""


def parse_request(raw: Any) -> tuple[HistoryRequest, list[str]]:
    """The request and its query tokens; `BadRequest` names the offending field."""
    request = validated(HistoryRequest, raw)
    tokens = text.query_tokens(request.query)
    if not tokens:
        raise BadRequest("query: history query requires at least one word")
    return request, tokens


def validated(model: type[Any], raw: Any) -> Any:
    """`model` validated from a request body, or `BadRequest` naming the first bad field.

    An empty body is an empty request; any other body that is not a JSON object is refused
    (taken as empty, garbage would be answered as if it were a real request)."""
    if raw in (None, b"", ""):
        raw = {}
    if not isinstance(raw, dict):
        raise BadRequest(f"the request must be a JSON object, got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "request"
        raise BadRequest(f"{where}: {first['msg']}") from None


@dataclass(frozen=True)
class Scope:
    """One chat a search may read: a session's messages up to `max_seq` (None: all)."""

    session_id: str
    max_seq: int | None
    depth: int


def scopes(session_id: str, lineage: Sequence[tuple[str, int]], parents: bool) -> list[Scope]:
    """The session itself, then (when allowed) its ancestors up to each fork point.

    `lineage` is [(parent id, forked at seq), (grandparent id, seq), ...] nearest first.
    """
    found = [Scope(session_id, None, 0)]
    if parents:
        allowed = lineage[:PARENT_DEPTH_MAX]
        found += [Scope(sid, seq, depth) for depth, (sid, seq) in enumerate(allowed, start=1)]
    return found


@dataclass(frozen=True)
class Row:
    """A matching history row, as the index returns it."""

    session_id: str
    seq: int
    message_id: str
    chat: str
    name: str
    is_user: bool
    ts: datetime
    text: str


def shape(rows: Sequence[Row], tokens: list[str], request: HistoryRequest) -> dict[str, Any]:
    """Hits in the given order until `limit` or the token budget runs out."""
    hits: list[dict[str, Any]] = []
    budget = request.max_tokens
    for row in rows:
        if len(hits) >= request.limit or budget <= 0:
            break
        hit = _hit(row, tokens, request.excerpt_chars)
        budget -= text.rough_tokens(hit["excerpt"])
        hits.append(hit)
    return {
        "hits": hits,
        "sourceCount": len(rows),
        "truncated": len(rows) > len(hits),
        "capped": len(rows) >= SCAN_CAP,
    }


def _hit(row: Row, tokens: list[str], width: int) -> dict[str, Any]:
    cut = text.excerpt(row.text, tokens, width)
    return {
        "chat": row.chat,
        "session_id": row.session_id,
        "seq": row.seq,
        "message_id": row.message_id,
        "name": row.name,
        "isUser": row.is_user,
        "date": row.ts.isoformat(),
        "excerpt": cut,
        "source": {"kind": "chat-history", "id": f"{row.session_id}#{row.seq}"},
        "truncated": cut != row.text,
    }
