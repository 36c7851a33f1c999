"""Settings of the gateway: shared `TAVERN_*` keys and its own `TAVERN_GATEWAY_*`."""

from __future__ import annotations

from pydantic import Field

from tavern_runtime.settings import TavernSettings


class GatewaySettings(TavernSettings):
    gateway_host: str = Field(default="127.0.0.1", description="address the web app listens on")
    gateway_port: int = Field(
        default=8470, ge=0, le=65535, description="port of the web app (0: pick a free one)"
    )
    gateway_public_url: str = Field(
        default="",
        description="the URL browsers use (https://... behind a proxy); decides Secure cookies",
    )
    gateway_session_ttl_s: int = Field(
        default=14 * 86_400, ge=60, description="a web session ends this long after sign-in"
    )
    gateway_max_upload_bytes: int = Field(
        default=8 * 1024 * 1024,
        ge=1024,
        description="largest card, lorebook, persona or memory export file",
    )
    gateway_max_body_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        description="largest request body of every route but uploads, refused before parsing",
    )
    gateway_login_failures: int = Field(
        default=5,
        ge=1,
        description="sign-ins per account and address in a window before a pause",
    )
    gateway_login_window_s: int = Field(default=300, ge=1, description="window of that count")
    gateway_invite_ttl_s: int = Field(default=7 * 86_400, ge=60, description="invite lifetime")
    gateway_rpc_timeout_s: float = Field(default=10.0, gt=0, description="deadline of an RPC")
