"""A flood against the running projector with a small backlog budget: the requests it cannot
take in time are answered `unavailable` (busy, retryable) at once, every request gets an answer
of the common model, nothing is dropped by the client library, and the service answers as
before once the flood has passed."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from tavern_events.replies import ErrorReply
from tests.integration.projector.conftest import Projector, stopped_projector
from tests.support import auth

pytestmark = pytest.mark.integration

BUDGET = 1024
"""Bytes that may wait: some twenty requests."""
BODY = json.dumps({"session_id": "flood-s1", "query": "the lighthouse keeper"}).encode()
"""A valid search: each one the projector serves costs a database query."""
CONCURRENT = 400


@pytest.fixture
async def small_budget(
    nats_url: str, database_url: str, tmp_path: Path
) -> AsyncIterator[Projector]:
    async with stopped_projector(
        nats_url, database_url, tmp_path / "data", rpc_max_backlog_bytes=BUDGET
    ) as found:
        await found.start()
        yield found


async def _burst(projector: Projector) -> list[dict[str, Any]]:
    """`CONCURRENT` requests written to the bus in one burst, and their replies."""
    nc = projector.bus.nc
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, max_msgs=CONCURRENT)
    for _ in range(CONCURRENT):
        await nc.publish("tavern.rpc.projector.history.search", BODY, reply=inbox, headers=auth())
    await nc.flush()
    replies = []
    for _ in range(CONCURRENT):
        msg = await sub.next_msg(timeout=30)
        replies.append(json.loads(msg.data))
    return replies


async def test_a_flood_past_the_backlog_budget_is_shed_busy_and_every_request_answered(
    small_budget: Projector,
) -> None:
    with capture_logs() as logs:
        replies = await _burst(small_budget)
    codes = Counter(
        ErrorReply.model_validate(r).error.code if "error" in r else "answered" for r in replies
    )
    shed = [ErrorReply.model_validate(r).error for r in replies if "error" in r]
    busy = [e for e in shed if e.reason == "busy"]
    assert busy, codes
    assert all(e.code == "unavailable" and e.retryable for e in busy)
    served = [r for r in replies if "error" not in r or r["error"].get("reason") != "busy"]
    assert served, "the first requests are served, not shed"
    assert len(served) + len(busy) == CONCURRENT, codes
    events = [e["event"] for e in logs]
    assert "rpc_shedding" in events
    assert "nats_error" not in events, "the client library dropped a request"
    after = await small_budget.rpc("history.search", {"session_id": "flood-s1", "query": "x"})
    assert "error" not in after, after
