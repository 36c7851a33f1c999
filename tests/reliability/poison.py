"""Poison and malformed messages, built per stream so each is "almost right" for its readers.

`expect` says what a reader that decodes the message must do: `dlq` (dead-letter it with the
reason), `skip` (an unknown type or newer version: skipped and counted, DESIGN.md §2), or `ok`
(valid but hostile, e.g. oversize: handled as data, with a structured outcome).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tavern_events.ids import new_id

GOLDEN = Path(__file__).resolve().parents[1] / "fixtures" / "events"
NESTING = 100_000
OVERSIZE = 1_000_000
"""Big, and still under the bus's `max_payload` (1 MiB + 64 KiB): bigger never reaches a stream."""


@dataclass(frozen=True)
class Poison:
    name: str
    data: bytes
    expect: str  # "dlq" | "skip" | "ok"


def golden(name: str, **changes: Any) -> dict[str, Any]:
    """A golden event payload with a fresh id and timestamp, and `changes` applied."""
    event: dict[str, Any] = json.loads((GOLDEN / f"{name}.json").read_text())
    if "id" in event:
        event["id"] = new_id()
    if "input_id" in event:
        event["input_id"] = new_id()
    event["ts"] = datetime.now(UTC).isoformat().replace("+00:00", "Z")
    event.update(changes)
    return event


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def nested(depth: int = NESTING) -> bytes:
    return b'{"type": "user/message", "payload": ' + b"[" * depth + b"]" * depth + b"}"


def common(good: Callable[[], dict[str, Any]]) -> list[Poison]:
    """The malformed shapes every stream gets, around one good event of that stream."""
    wrong_types = good() | {"v": "one", "payload": {"text": 42, "kind": ["?"]}}
    dotted = good()
    for key in ("id", "session_id", "input_id", "asset_id", "scope_id"):
        if key in dotted:
            dotted[key] = "a.b.*.>"
    return [
        Poison("not JSON", b"\x00this is not json {", "dlq"),
        Poison("invalid UTF-8", b'{"type": "user/message", "id": "\xff\xfe\xfd"}', "dlq"),
        Poison("JSON array", b"[1, 2, 3]", "dlq"),
        Poison("JSON string", b'"just a string"', "dlq"),
        Poison("wrong field types", dumps(wrong_types), "dlq"),
        Poison("ids with dots and wildcards", dumps(dotted), "dlq"),
        Poison("unknown event type", dumps(good() | {"type": "alien/probe"}), "skip"),
        Poison("newer version", dumps(good() | {"v": 99}), "skip"),
        Poison("deeply nested JSON", nested(), "dlq"),
        Poison("big garbage (1 MB)", b"x" * OVERSIZE, "dlq"),
    ]


def session_poison(session_id: str) -> list[Poison]:
    def good() -> dict[str, Any]:
        return golden("user__message", session_id=session_id)

    big = good()
    big["payload"]["text"] = "big " * (OVERSIZE // 4)
    return [*common(good), Poison("big valid event (1 MB text)", dumps(big), "ok")]


def input_poison(session_id: str) -> list[Poison]:
    def good() -> dict[str, Any]:
        return golden("input__message", session_id=session_id)

    # The dispatcher has no use for an input it cannot read: an unknown input type is poison.
    found = [
        Poison(p.name, p.data, "dlq" if p.expect == "skip" else p.expect) for p in common(good)
    ]
    return [
        *found,
        Poison("session id unlike its subject", dumps(good() | {"session_id": "other"}), "dlq"),
    ]


def ledger_poison(scope_id: str) -> list[Poison]:
    return common(lambda: golden("memory__changed", scope_id=scope_id))


def asset_poison(asset_id: str) -> list[Poison]:
    return common(lambda: golden("asset__imported", asset_id=asset_id))


# --- RPC bodies -------------------------------------------------------------------------------


def rpc_poison() -> list[Poison]:
    """Request bodies no RPC should take, each to be answered with a structured error."""
    forged = {"session_id": "s.*.>", "scope_id": "*", "chat_id": "a.b", "id": ">", "limit": -1}
    return [
        Poison("not JSON", b"\x00this is not json {", "error"),
        Poison("invalid UTF-8", b'{"session_id": "\xff\xfe"}', "error"),
        Poison("JSON array", b"[1, 2, 3]", "error"),
        Poison("JSON string", b'"just a string"', "error"),
        Poison(
            "wrong field types", dumps({"session_id": 42, "limit": "many", "query": {}}), "error"
        ),
        Poison("ids with dots and wildcards", dumps(forged), "error"),
        Poison(
            "deeply nested JSON", b'{"query": ' + b"[" * NESTING + b"]" * NESTING + b"}", "error"
        ),
        Poison("big body (1 MB)", dumps({"query": "q" * OVERSIZE}), "error"),
    ]
