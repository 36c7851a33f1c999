"""What a profile gives the loop for each model request: system prompt, tools, history.

The loop is the same for every profile (one loop, the same event types); a profile only decides
what one request carries. `params` go into `agent/request` so the request can be rebuilt from
the log (`domain.rebuild.rebuild_request`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from tavern_llm.tokens import messages_tokens, system_tokens, tools_tokens
from tavern_loop.domain.history import Message
from tavern_loop.domain.projection import Projection
from tavern_loop.sessionlog import HeldLog


class ProfileUnavailable(Exception):
    """The profile cannot build a faithful request (e.g. the card of an st session is out of
    reach); the turn fails with this reason instead of sending something else."""


@dataclass(frozen=True)
class RequestPlan:
    system: str
    tools: list[dict[str, Any]]
    history: list[Message]
    params: dict[str, Any] = field(default_factory=dict)
    projection: Projection | None = None
    """Agent-managed mode: the projection to record as `request/projection`."""
    surface_generation: int = 0
    history_tokens: int | None = None
    """`messages_tokens(history)` when the caller already knows it (the surface keeps it)."""

    def messages(self) -> list[Message]:
        return [{"role": "system", "content": self.system}, *self.history]

    def estimate(self) -> int:
        history = self.history_tokens
        if history is None:
            history = messages_tokens(self.history)
        return system_tokens(self.system) + tools_tokens(self.tools) + history


class Profile(Protocol):
    label: str
    recall: bool
    """Whether pre-step recall injects ledger context."""
    compacts: bool
    """Whether the host's compaction (pressure, overflow, /compact) applies."""

    async def plan(self, held: HeldLog, turn: int, window: int, form: str | None) -> RequestPlan:
        """The next request of turn `turn`; `form` is `swipe`/`regenerate` for such replies."""
        ...
