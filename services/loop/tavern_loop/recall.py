"""Pre-step recall: budgeted context from the ledger, or nothing (never a failed step)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from nats.aio.client import Client
from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout

from tavern_events import subjects
from tavern_events.group import Speaker
from tavern_runtime import tracing
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

RECALL_SUBJECT = subjects.rpc("ledger", "recall")


@dataclass(frozen=True)
class Recall:
    text: str
    items: int


class RecallClient:
    """Asks `tavern.rpc.ledger.recall` with a deadline; any failure means no injection (None),
    an answer with nothing found is a `Recall` with empty text."""

    def __init__(self, nc: Client, timeout_s: float = 3.0) -> None:
        self._nc, self._timeout = nc, timeout_s

    async def fetch(
        self,
        session_id: str,
        query: str,
        turn: int,
        step: int,
        headers: dict[str, str] | None = None,
        member: Speaker | None = None,
    ) -> Recall | None:
        """`headers` carry who asks (the loop acting for the session's owner); `member`, a
        group chat's speaking member, recalls its own memory beside the group chat's."""
        request: dict[str, Any] = {"session_id": session_id, "query": query, "turn": turn}
        request["step"] = step
        if member is not None:
            request |= {"member": member.character_id, "member_name": member.name}
        try:
            attributes = partial(_attrs, session_id, turn)  # made only when tracing is on
            with tracing.span("loop.recall", kind="client", attributes=attributes):
                reply = await self._nc.request(
                    RECALL_SUBJECT,
                    json.dumps(request).encode(),
                    timeout=self._timeout,
                    headers=tracing.with_context(headers),
                )
            body: dict[str, Any] = json.loads(reply.data or b"{}")
        except (NoRespondersError, NatsTimeout, ValueError) as exc:
            log.warning("recall_unavailable", session_id=session_id, error=type(exc).__name__)
            return None
        if body.get("error"):
            return None
        text = str(body.get("text") or "").strip()
        return Recall(text, int(body.get("count", 0)) if text else 0)


def _attrs(session_id: str, turn: int) -> dict[str, str | int]:
    return {"tavern.session_id": session_id, "tavern.turn": turn}
