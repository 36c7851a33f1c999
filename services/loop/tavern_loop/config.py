"""Settings of the loop: shared `TAVERN_*` keys and its own `TAVERN_LOOP_*`."""

from __future__ import annotations

from tavern_runtime.settings import TavernSettings


class LoopSettings(TavernSettings):
    """Own keys are named `loop_*`, so their variables read `TAVERN_LOOP_*` (none yet)."""
