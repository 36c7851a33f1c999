"""Post-execute bounding of a result: spill over the inline limit, else a hard cut at the limit.

Spill is best-effort: when saving fails, or the preview cannot fit, the hard cut still applies.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import structlog

from tavern_loop.domain.spill import needs_spill, spill_preview
from tavern_loop.tools.limits import cut_to_bytes
from tavern_loop.tools.spillstore import SpillStore

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class SpillPolicy:
    store: SpillStore
    max_inline_bytes: int = 50_000
    exempt: frozenset[str] = field(default_factory=lambda: frozenset({"spill_read"}))
    """Tools whose output is never spilled (reading a spill must not spill again)."""

    def __post_init__(self) -> None:
        if self.max_inline_bytes < 0:
            raise ValueError("max_inline_bytes must be >= 0")


@dataclass(frozen=True)
class Bounded:
    content: str
    truncated: bool = False
    spill_locator: str | None = None
    spill_bytes: int | None = None


@dataclass(frozen=True)
class ResultOrigin:
    session_id: str
    tool_name: str
    call_id: str


async def bound_result(
    content: str, origin: ResultOrigin, spill: SpillPolicy | None, hard_limit: int
) -> Bounded:
    """The content the model sees: as is, a spill preview with its locator, or a hard cut."""
    if spill is not None and _spills(content, origin, spill):
        spilled = await _spill(content, origin, spill)
        if spilled is not None:
            return spilled
    cut = cut_to_bytes(content, hard_limit)
    return Bounded(content) if cut is None else Bounded(cut, truncated=True)


def _spills(content: str, origin: ResultOrigin, spill: SpillPolicy) -> bool:
    return origin.tool_name not in spill.exempt and needs_spill(content, spill.max_inline_bytes)


async def _spill(content: str, origin: ResultOrigin, spill: SpillPolicy) -> Bounded | None:
    try:
        locator = await asyncio.to_thread(
            spill.store.save, origin.session_id, origin.tool_name, origin.call_id, content
        )
    except OSError as exc:
        log.warning("tool_spill_failed", tool=origin.tool_name, error=str(exc))
        return None
    preview = spill_preview(content, locator, spill.max_inline_bytes)
    if preview is None:
        log.warning("tool_spill_preview_too_big", tool=origin.tool_name, locator=locator)
        return None
    size = len(content.encode("utf-8"))
    log.info("tool_spilled", tool=origin.tool_name, locator=locator, bytes=size)
    return Bounded(preview.text, truncated=True, spill_locator=locator, spill_bytes=size)
