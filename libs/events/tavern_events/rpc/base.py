"""What every RPC of the contract shares: the reply base, `ping`, and the request headers."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from tavern_events.replies import TIMEOUT_HEADER

PRINCIPAL_HEADER = "Tavern-Principal"
"""Contract name: the NATS header that carries the caller's signed principal token."""
REQUEST_HEADERS: dict[str, str] = {
    PRINCIPAL_HEADER: "The caller's principal: a signed, short-lived token (docs/security.md). "
    "Every operation but `ping` refuses a request without one (`unauthenticated`).",
    TIMEOUT_HEADER: "How long the caller waits for the reply, in milliseconds; the service "
    "answers `timeout` before then rather than let the wait run out in silence.",
}


class RpcRequest(BaseModel):
    """A request body: tolerant of unknown fields unless a subclass says otherwise."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class RpcReply(BaseModel):
    """A successful reply: the documented keys; a service may add more (readers ignore them)."""

    model_config = ConfigDict(frozen=True, extra="allow")


class PingRequest(RpcRequest):
    """`ping` reads no body."""


class PingReply(RpcReply):
    service: str
    version: str
    ok: bool


class AuditEntry(RpcReply):
    """One audited operation: who did what to which target, when and why."""

    id: int
    ts: str
    op: str
    scope_id: str | None
    target_id: str | None
    actor: str
    reason: str | None
    payload: Any = None
