"""Session leases in a NATS KV bucket: one writer per session across loop replicas.

create = acquire, update with the expected revision = renew, delete with it = release. The
bucket's max age is the TTL: a crashed holder's lease expires and another replica takes over.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError, NotFoundError
from nats.js.kv import KeyValue

from tavern_runtime.logs import get_logger

log = get_logger(__name__)

BUCKET = "tavern_leases"


def lease_key(session_id: str) -> str:
    return f"session.{session_id}"


@dataclass
class Lease:
    session_id: str
    holder: str
    revision: int


class Leases:
    """Acquire, renew and release session leases for one replica (`holder`)."""

    def __init__(self, kv: KeyValue, holder: str) -> None:
        self._kv = kv
        self.holder = holder

    async def acquire(self, session_id: str) -> Lease | None:
        """The lease if nobody holds it (or it expired); None while another replica holds it."""
        key = lease_key(session_id)
        try:
            revision = await self._kv.create(key, self.holder.encode())
        except KeyWrongLastSequenceError:
            return None
        log.info("lease_acquired", session_id=session_id, holder=self.holder)
        return Lease(session_id, self.holder, revision)

    async def holder_of(self, session_id: str) -> str | None:
        try:
            entry = await self._kv.get(lease_key(session_id))
        except (KeyNotFoundError, NotFoundError):
            return None
        return entry.value.decode() if entry.value else None

    async def renew(self, lease: Lease) -> bool:
        """False when the lease was lost (expired and taken, or deleted)."""
        try:
            lease.revision = await self._kv.update(
                lease_key(lease.session_id), self.holder.encode(), last=lease.revision
            )
        except (KeyWrongLastSequenceError, KeyNotFoundError, NotFoundError):
            log.warning("lease_lost", session_id=lease.session_id, holder=self.holder)
            return False
        return True

    async def release(self, lease: Lease) -> None:
        with contextlib.suppress(KeyWrongLastSequenceError, KeyNotFoundError, NotFoundError):
            await self._kv.delete(lease_key(lease.session_id), last=lease.revision)
        log.info("lease_released", session_id=lease.session_id, holder=self.holder)


class LeaseKeeper:
    """Renews a lease every `interval` seconds until stopped; `lost` is set if renewal fails."""

    def __init__(self, leases: Leases, lease: Lease, interval: float) -> None:
        self._leases, self.lease, self._interval = leases, lease, interval
        self.lost = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"lease-{self.lease.session_id}")

    async def _run(self) -> None:
        while not self.lost.is_set():
            await asyncio.sleep(self._interval)
            try:
                ok = await self._leases.renew(self.lease)
            except Exception as exc:
                log.warning("lease_renew_failed", session_id=self.lease.session_id, error=str(exc))
                continue
            if not ok:
                self.lost.set()

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
