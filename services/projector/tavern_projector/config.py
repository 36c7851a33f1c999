"""Settings of the projector: shared `TAVERN_*` keys and its own `TAVERN_PROJECTOR_*`."""

from __future__ import annotations

from pathlib import Path
from zoneinfo import ZoneInfo

from pydantic import Field

from tavern_runtime.settings import TavernSettings


class ProjectorSettings(TavernSettings):
    """Own keys are named `projector_*`, so their variables read `TAVERN_PROJECTOR_*`."""

    projector_pool_max: int = Field(
        default=10, ge=1, le=200, description="Postgres connections of one process"
    )
    projector_chats_dir: Path | None = Field(
        default=None, description="where chat JSONL files go (default <data dir>/chats)"
    )
    projector_timezone: str = Field(
        default="UTC", description="time zone of SillyTavern send dates in chat files"
    )
    projector_character_name: str = Field(
        default="Assistant", description="speaker name when a session names no character"
    )
    projector_user_name: str = Field(
        default="User", description="user name when a session names no persona"
    )
    projector_batch_size: int = Field(default=256, ge=1, le=4096)
    projector_gather_s: float = Field(
        default=0.01,
        ge=0,
        le=1,
        description="how long a batch gathers after its first event while few sessions are "
        "live: a read model follows a finished turn within about this long",
    )
    projector_busy_gather_s: float = Field(
        default=0.1,
        ge=0,
        le=1,
        description="how long a batch gathers once a batch carries three sessions or more: "
        "several turns of many sessions then share one batch (fewer statements, fetches and "
        "fsyncs per turn), and the read models lag a finished turn by up to this long more",
    )
    projector_rebuild_on_start: bool = Field(
        default=True, description="rebuild projections whose stored version is outdated"
    )

    projector_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="scheduling niceness of the process: read models yield the CPU to the "
        "turns people wait on, and catch up in larger batches once the load eases (0 = as "
        "started)",
    )

    @property
    def niceness(self) -> int:
        return self.projector_nice

    @property
    def chats_dir(self) -> Path:
        return self.projector_chats_dir or self.data_dir / "chats"

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.projector_timezone)
