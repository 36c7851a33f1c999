"""Read your own import: a card or persona the gateway just published is usable once the
projector holds it (the loop reads greetings, names and avatars from the projector, not from the
gateway's gallery), so an import answers when the projector has that version, or says it has
not yet after a bounded wait."""

from __future__ import annotations

import asyncio
import time

from tavern_gateway.bus import Bus, Refused, Unavailable
from tavern_runtime.principals import Principal

PROJECTED_WAIT_S = 10.0
FIRST_POLL_S = 0.02
POLL_MAX_S = 0.25
WAITED_KINDS = ("character", "persona")


async def until_projected(
    bus: Bus,
    principal: Principal,
    kind: str,
    asset_id: str,
    content_hash: str,
    timeout_s: float = PROJECTED_WAIT_S,
) -> bool | None:
    """Whether the projector holds this version of `asset_id` as `principal` reads it (None: a
    kind the loop does not read by id, not waited for); False after `timeout_s` without it."""
    if kind not in WAITED_KINDS:
        return None
    body = {"kind": kind, "character": asset_id, "fields": ["name"], "max_chars": 16}
    deadline = time.monotonic() + timeout_s
    pause = FIRST_POLL_S
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            reply = await asyncio.wait_for(
                bus.rpc(principal, "projector", "character.get", body), left
            )
        except (Refused, Unavailable, TimeoutError):
            reply = {}
        source = reply.get("source")
        if isinstance(source, dict) and source.get("hash") == content_hash:
            return True
        await asyncio.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, POLL_MAX_S)
