"""Settings shared by every process, read from `TAVERN_*` environment variables."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


class TavernSettings(BaseSettings):
    """The shared keys. Services subclass this and add keys with their own prefix."""

    model_config = SettingsConfigDict(env_prefix="TAVERN_", extra="ignore", frozen=True)

    nats_url: str = Field(
        default="nats://127.0.0.1:4222", description="NATS servers, comma separated"
    )
    database_url: str = Field(default="", description="Postgres DSN; empty = embedded server")
    log_level: str = "INFO"
    log_format: Literal["auto", "json", "console"] = "auto"
    data_dir: Path = Path(".tavern")
    auth_key: SecretStr = Field(
        default=SecretStr(""),
        description="key that signs and checks principal tokens (32+ bytes); empty = the "
        "`auth.key` file in the data dir, which `tavern up` and `tavern init` create",
    )
    nats_user: str = ""
    nats_password: str = ""
    stream_replicas: int = Field(
        default=1,
        ge=1,
        le=5,
        description="replicas of the streams and buckets `tavern init` creates; the loop also "
        "groups its session-log appends into atomic batches when streams are replicated",
    )
    health_host: str = "127.0.0.1"
    health_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="0 = pick a free port (written to <data_dir>/run/<service>.health)",
    )
    shutdown_grace_s: float = 15.0
    rpc_max_request_bytes: int = Field(
        default=1024 * 1024,
        ge=1024,
        le=64 * 1024 * 1024,
        description="largest RPC request a service reads; bigger ones get a `too_large` error",
    )
    rpc_max_backlog_bytes: int = Field(
        default=32 * 1024 * 1024,
        ge=1024,
        description="requests (bytes) that may wait on a service's RPC subscriptions; past it "
        "a request is answered `unavailable` (busy, retryable) at once instead of queued",
    )
    rpc_deadline_s: float = Field(
        default=25.0,
        gt=0,
        description="longest an RPC handler may run before the caller gets a `timeout` error",
    )

    otlp_endpoint: str = Field(
        default="",
        description="OTLP/HTTP base URL spans are exported to (e.g. http://collector:4318); "
        "empty = OpenTelemetry's OTEL_EXPORTER_OTLP_ENDPOINT, and tracing is off when that is "
        "unset too (docs/tracing.md)",
    )

    @property
    def niceness(self) -> int:
        """The scheduling niceness the process lowers itself to at start (0 = as started).
        Services whose work nobody waits on (read models, consolidation) raise it, so under load
        the turns people wait on get the CPU first."""
        return 0

    @property
    def nats_servers(self) -> list[str]:
        return [s.strip() for s in self.nats_url.split(",") if s.strip()]
