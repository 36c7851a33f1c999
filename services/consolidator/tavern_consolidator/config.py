"""Settings of the consolidator: shared `TAVERN_*` keys and its own `TAVERN_CONSOLIDATOR_*`."""

from __future__ import annotations

from pydantic import Field

from tavern_runtime.settings import TavernSettings


class ConsolidatorSettings(TavernSettings):
    """Own keys are named `consolidator_*`, so their variables read `TAVERN_CONSOLIDATOR_*`."""

    consolidator_pool_max: int = Field(
        default=10, ge=1, le=200, description="Postgres connections of one process"
    )
