"""What the store operations need from their process: pool, policy, clock, ids."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from tavern_events.ids import new_id
from tavern_ledger.domain.memory import GateOutcome
from tavern_ledger.domain.store_limits import StoreLimits
from tavern_ledger.memorystore.gate import memory_gate
from tavern_runtime.pg import Pool


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class StoreContext:
    pool: Pool
    global_enabled: bool = False
    limits: StoreLimits = field(default_factory=StoreLimits)
    gate: Callable[[str, str], GateOutcome] = memory_gate
    now: Callable[[], datetime] = utc_now
    new_id: Callable[[], str] = new_id
    catch_up: Callable[[str], Awaitable[bool]] | None = None
    """Read an unknown session's binding from its log (the RPC layer retries once after it)."""
