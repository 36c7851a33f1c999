"""Settings of the loop: shared `TAVERN_*` keys and its own `TAVERN_LOOP_*`."""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from pydantic import Field

from tavern_loop.options import LoopOptions, ProfileOptions, ProjectionOptions
from tavern_loop.slots import DEFAULT_TURN_SLOTS
from tavern_loop.streaming import CHUNK_INTERVAL_S
from tavern_runtime.settings import TavernSettings


class LoopSettings(TavernSettings):
    """Own keys are named `loop_*`, so their variables read `TAVERN_LOOP_*`."""

    loop_default_architecture: Literal["agent-tavern", "st"] = Field(
        default="agent-tavern", description="architecture of new sessions (existing keep theirs)"
    )
    loop_default_context_mode: Literal["dsh-native", "agent-managed"] = Field(
        default="dsh-native", description="context mode of new agent-tavern sessions"
    )
    loop_agent_managed: bool = Field(
        default=True,
        description="offer agent-managed mode (per-request projection, projection-aware "
        "compaction); off: sessions may not switch to it",
    )
    loop_allow_global_writes: bool = Field(
        default=False, description="let tools write the global memory and variable scope"
    )
    loop_allow_bulk_deletes: bool = Field(
        default=False, description="let one variable_patch delete several variables"
    )
    loop_log_cache_events: int = Field(
        default=50_000,
        ge=0,
        description="events of session logs kept after their runner lets them go (about 3 KB "
        "each: 150 MB at the default), so a session's next turn reads only what was stored "
        "since; 0: read whole",
    )
    loop_chunk_interval_s: float = Field(
        default=CHUNK_INTERVAL_S,
        ge=0,
        description="least seconds between two stored assistant/chunk events of one reply "
        "(live updates a reader sees while a model streams; each is a stored, fsynced message)",
    )
    loop_turn_slots: int = Field(
        default=DEFAULT_TURN_SLOTS,
        ge=0,
        description="turns of one loop replica that advance their logs at once, the oldest "
        "first; the others wait their turn, so under a fleet every turn waits about as long "
        "(a turn waiting on its model holds no slot); 0: no limit (the default: it helps "
        "models that answer at once, and made the tail worse with one that streams)",
    )
    loop_followups_per_turn: int = Field(
        default=1,
        ge=1,
        description="messages sent while a session is idle that one turn enters (DSH: 1, one "
        "turn each); messages sent during a turn join it at its next step",
    )
    loop_approvals_quiet_s: float = Field(
        default=30.0,
        ge=0,
        description="after the consolidator answered that no style promotion awaits a "
        "session's decision, seconds its turns do not ask again (0: ask at every turn)",
    )
    loop_projection_ratios: dict[str, float] = Field(
        default_factory=lambda: {"kernel": 0.15, "recent": 0.35, "retrieved": 0.25, "reply": 0.25},
        description="agent-managed budget zones as shares of the context window",
    )


def loop_options(settings: LoopSettings) -> LoopOptions:
    """The loop's options with the profile settings of `settings` applied."""
    ratios = settings.loop_projection_ratios
    defaults = ProjectionOptions()
    projection = replace(
        defaults,
        kernel_ratio=ratios.get("kernel", defaults.kernel_ratio),
        recent_ratio=ratios.get("recent", defaults.recent_ratio),
        retrieved_ratio=ratios.get("retrieved", defaults.retrieved_ratio),
        reply_ratio=ratios.get("reply", defaults.reply_ratio),
    )
    profiles = ProfileOptions(
        default_architecture=settings.loop_default_architecture,
        default_context_mode=settings.loop_default_context_mode,
        projection_available=settings.loop_agent_managed,
        compaction_cooperates=settings.loop_agent_managed,
        allow_global_writes=settings.loop_allow_global_writes,
        allow_bulk_deletes=settings.loop_allow_bulk_deletes,
        projection=projection,
    )
    return LoopOptions(
        profiles=profiles,
        log_cache_events=settings.loop_log_cache_events,
        chunk_interval_s=settings.loop_chunk_interval_s,
        turn_slots=settings.loop_turn_slots,
        followups_per_turn=settings.loop_followups_per_turn,
        approvals_quiet_s=settings.loop_approvals_quiet_s,
    )
