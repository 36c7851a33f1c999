"""`tavern restore`: republish the archived session events into an empty SESSIONS stream,
in stream order, with their original `Nats-Msg-Id`s, each append conditional on its
session's last sequence, so the loop can carry on every session where it stopped."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import Header
from nats.js.errors import NotFoundError

from tavern_events import streams, subjects
from tavern_projector import sources
from tavern_projector.sources import Start
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.logs import get_logger
from tavern_runtime.provision import provision
from tavern_runtime.sessionlog import EXPECTED_SUBJECT

log = get_logger(__name__)

STREAM = streams.SESSIONS.name
_DROPPED_PREFIXES = ("Nats-Expected", "Nats-Batch", "Nats-Stream", "Nats-Sequence", "Nats-Subject")


@dataclass
class RestoreReport:
    events: int = 0
    sessions: set[str] = field(default_factory=set)
    moved: list[tuple[int, int]] = field(default_factory=list)
    """(archived stream seq, restored stream seq) where they differ."""
    redacted: int = 0


def restore_headers(archived: Mapping[str, str], session_id: str, expected: int) -> dict[str, str]:
    """The original id and custom headers; fresh expectations instead of the old ones."""
    kept = {k: v for k, v in archived.items() if not k.startswith(_DROPPED_PREFIXES)}
    kept[Header.EXPECTED_LAST_SUBJECT_SEQUENCE.value] = str(expected)
    kept[EXPECTED_SUBJECT] = subjects.session_filter(session_id)
    return kept


async def stored_messages(js: JetStreamContext) -> int | None:
    """How many messages SESSIONS holds (None: the stream does not exist)."""
    try:
        info = await js.stream_info(STREAM)
    except NotFoundError:
        return None
    return int(info.state.messages)


async def restore(
    pool: Any, js: JetStreamContext, progress: Callable[[int], None], *, replicas: int | None = None
) -> RestoreReport:
    """Refuses a stream that holds messages: restoring never interleaves with live appends."""
    held = await stored_messages(js)
    if held:
        raise ConfigurationError(
            f"{STREAM} holds {held} messages: restore only fills a missing or empty stream"
        )
    if held is None:
        await provision(js, stream_specs=[streams.SESSIONS], buckets=(), replicas=replicas)
    report, heads = RestoreReport(), dict[str, int]()
    async for batch in sources.archive_batches(pool, (subjects.SESSIONS_ALL,), Start()):
        for entry in batch:
            await _republish(js, entry, heads, report)
        progress(len(batch))
    log.info("sessions_restored", events=report.events, sessions=len(report.sessions))
    return report


async def _republish(
    js: JetStreamContext, entry: Any, heads: dict[str, int], report: RestoreReport
) -> None:
    session_id = subjects.session_id_of(entry.subject)
    headers = restore_headers(entry.headers, session_id, heads.get(session_id, 0))
    ack = await js.publish(entry.subject, entry.data, stream=STREAM, headers=headers, timeout=10)
    heads[session_id] = ack.seq
    report.events += 1
    report.sessions.add(session_id)
    if ack.seq != entry.stream_seq:
        report.moved.append((entry.stream_seq, ack.seq))


async def archive_summary(pool: Any) -> dict[str, Any]:
    async with pool.acquire() as conn:
        row = await conn.fetchrow(
            """SELECT count(*) AS events, count(DISTINCT session_id) AS sessions,
                      max(stream_seq) AS last_seq, count(redacted_at) AS redacted
               FROM projector.session_events"""
        )
        checkpoint = await conn.fetchval(
            "SELECT stream_seq FROM projector.checkpoints WHERE name = 'archive'"
        )
    return {**dict(row), "checkpoint": checkpoint}


def decode_headers(value: Any) -> dict[str, str]:
    found = json.loads(value) if isinstance(value, str) else value
    return dict(found or {})
