"""RPC limits: oversize and malformed requests and over-eager callers get structured errors."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.ledger.conftest import LedgerBus

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


async def test_search_limits_are_capped(ledger: LedgerBus) -> None:
    reply = await ledger.rpc("query", limit=10_000_000)
    assert reply == {"items": [], "count": 0}
