"""RPC limits: oversize and malformed requests and over-eager callers get structured errors."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.ledger.conftest import LedgerBus
from tests.support import signed_user

pytestmark = pytest.mark.integration


@pytest.fixture
def ledger_options() -> dict[str, Any]:
    return {
        "ledger_rpc_rate_per_s": 0.5,
        "ledger_rpc_burst": 3,
        "ledger_rpc_max_request_bytes": 4096,
    }


async def test_oversize_and_malformed_requests_get_structured_errors(ledger: LedgerBus) -> None:
    big = await ledger.rpc_raw("query", b'{"text": "' + b"x" * 5000 + b'"}')
    assert big["error"]["code"] == "too_large"
    broken = await ledger.rpc_raw("inspect", b"{not json")
    assert broken["error"]["code"] == "invalid"
    missing = await ledger.rpc("recall", query="no session id")
    assert missing["error"]["code"] == "invalid"
    assert "session_id" in missing["error"]["message"]
    unknown = await ledger.rpc("inspect", evidence_id="ev_000000000000000000000000")
    assert unknown["error"]["code"] == "not_found"


async def test_a_session_over_its_request_rate_is_refused(ledger: LedgerBus) -> None:
    replies = [await ledger.rpc("recall", session_id="busy", query="hello there") for _ in range(5)]
    codes = [r.get("error", {}).get("code") for r in replies]
    assert codes[:3] == [None, None, None]
    assert codes[3:] == ["rate_limited", "rate_limited"]
    other = await ledger.rpc("recall", session_id="calm", query="hello there")
    assert "error" not in other


async def propose_codes(
    ledger: LedgerBus, scope_id: str, count: int, **body: Any
) -> list[str | None]:
    """The error codes (None: served) of `count` proposals about `scope_id` in a row."""
    found = []
    for n in range(count):
        reply = await ledger.rpc(
            "observation.propose",
            scope_id=scope_id,
            subject="cat",
            predicate=f"fact {n}",
            claim_domain="user_fact",
            text=f"The cat likes the number {n}.",
            **body,
        )
        found.append(reply.get("error", {}).get("code"))
    return found


async def test_the_rate_is_per_caller_and_scope_and_a_declared_actor_changes_nothing(
    ledger: LedgerBus,
) -> None:
    """Consolidation proposes for every scope as one service: a busy scope must not hold the
    others back, and naming another actor in the body does not give a caller a fresh bucket."""
    assert await propose_codes(ledger, "chat_busy", 3) == [None, None, None]
    assert await propose_codes(ledger, "chat_busy", 1, actor="someone-else") == ["rate_limited"]
    assert await propose_codes(ledger, "chat_calm", 3) == [None, None, None]
    queried = [await ledger.rpc("query", text="cat") for _ in range(4)]
    assert [r.get("error", {}).get("code") for r in queried] == [None, None, None, "rate_limited"]
    alice = await ledger.rpc("query", headers=signed_user("alice"), text="cat")
    assert alice["error"]["code"] == "forbidden"  # past the limit (it answers first): her own


async def test_search_limits_are_capped(ledger: LedgerBus) -> None:
    reply = await ledger.rpc("query", limit=10_000_000)
    assert reply == {"items": [], "count": 0}
