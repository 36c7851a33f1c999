"""Session leases in a NATS KV bucket: one writer per session across loop replicas.

create = acquire, update with the expected revision = renew, delete with it = release. The
bucket's max age is the TTL: a crashed holder's lease expires and another replica takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass

from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from tavern_runtime.acks import WRONG_LAST_SEQUENCE
from tavern_runtime.logs import get_logger
from tavern_runtime.sessionlog import PIPELINE_LEASE_MARGIN_S

log = get_logger(__name__)

BUCKET = "tavern_leases"


def lease_key(session_id: str) -> str:
    return f"session.{session_id}"


@dataclass
class Lease:
    session_id: str
    holder: str
    revision: int
    since: float = 0.0
    """`time.monotonic()` when the request that last took or renewed it was sent: the lease
    lasts at least a TTL from then (0: unknown)."""


class Leases:
    """Acquire, renew and release session leases for one replica (`holder`)."""

    def __init__(self, kv: KeyValue, holder: str) -> None:
        self._kv = kv
        self.holder = holder

    async def acquire(self, session_id: str) -> Lease | None:
        """The lease if nobody holds it (or it expired); None while another replica holds it."""
        key, sent = lease_key(session_id), time.monotonic()
        try:
            revision = await self._kv.create(key, self.holder.encode())
        except (KeyWrongLastSequenceError, KeyNotFoundError, NotFoundError):
            # Held, or a release raced nats-py's create (which re-reads a deleted key and finds
            # it gone): either way not ours now; the dispatcher asks again shortly.
            return None
        log.info("lease_acquired", session_id=session_id, holder=self.holder)
        return Lease(session_id, self.holder, revision, since=sent)

    async def holder_of(self, session_id: str) -> str | None:
        try:
            entry = await self._kv.get(lease_key(session_id))
        except (KeyNotFoundError, NotFoundError):
            return None
        return entry.value.decode() if entry.value else None

    async def renew(self, lease: Lease) -> bool:
        """False when the lease was lost (expired and taken, or deleted)."""
        sent = time.monotonic()
        try:
            lease.revision = await self._kv.update(
                lease_key(lease.session_id), self.holder.encode(), last=lease.revision
            )
        except (KeyWrongLastSequenceError, KeyNotFoundError, NotFoundError):
            log.warning("lease_lost", session_id=lease.session_id, holder=self.holder)
            return False
        lease.since = sent
        return True

    async def release(self, lease: Lease) -> None:
        """Delete the lease if it is still ours. A renewal whose outcome was unknown (a timeout)
        may have moved its revision on: then the current entry is checked and, ours, deleted;
        left behind, it would hold the session for a whole TTL."""
        key = lease_key(lease.session_id)
        try:
            await self._kv.delete(key, last=lease.revision)
        except (KeyNotFoundError, NotFoundError):
            pass
        except APIError as exc:  # `delete` reports a stale revision as a plain API error
            if exc.err_code not in WRONG_LAST_SEQUENCE and not isinstance(
                exc, KeyWrongLastSequenceError
            ):
                raise
            await self._release_current(key)
        log.info("lease_released", session_id=lease.session_id, holder=self.holder)

    async def _release_current(self, key: str) -> None:
        try:
            entry = await self._kv.get(key)
        except (KeyNotFoundError, NotFoundError):
            return
        if entry.value is None or entry.value.decode() != self.holder or entry.revision is None:
            return  # another replica holds it now
        with contextlib.suppress(APIError, KeyNotFoundError, NotFoundError):
            await self._kv.delete(key, last=entry.revision)


class LeaseKeeper:
    """Renews a lease every `interval` seconds until stopped; `lost` is set if renewal fails."""

    def __init__(self, leases: Leases, lease: Lease, interval: float, ttl: float) -> None:
        self._leases, self.lease, self._interval, self._ttl = leases, lease, interval, ttl
        self.lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._renewing = False

    def fresh(self) -> bool:
        """Whether the lease has more than `PIPELINE_LEASE_MARGIN_S` left for certain: then a
        pipelined append sent now is dropped by the server, if its sender stalls, before
        another replica could take the session."""
        left = self.lease.since + self._ttl - time.monotonic()
        return self.lease.since > 0 and left > PIPELINE_LEASE_MARGIN_S

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"lease-{self.lease.session_id}")

    async def _run(self) -> None:
        while not self.lost.is_set() and not self._stopping:
            await asyncio.sleep(self._interval)
            self._renewing = True
            try:
                ok = await self._leases.renew(self.lease)
            except Exception as exc:
                log.warning("lease_renew_failed", session_id=self.lease.session_id, error=str(exc))
                continue
            finally:
                self._renewing = False
            if not ok:
                self.lost.set()

    async def stop(self) -> None:
        """Stop renewing. A renewal in flight is let finish rather than cancelled: cancelled,
        it may land anyway and leave a stale revision for the release, and on Python 3.11
        `asyncio.wait_for` (inside nats-py's request) can swallow the cancellation, leaving a
        keeper that renews forever a lease no runner uses."""
        self._stopping = True
        if self._task is None:
            return
        if not self._renewing:
            self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
