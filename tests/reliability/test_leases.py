"""Regressions the load found in session leases: a renewal cut off by the keeper's stop left a
stale revision (the release failed and the lease held the session for a TTL), and a cancelled
renewal could survive its cancellation (Python 3.11 `wait_for`) and renew a dead runner's lease
forever, so the session never ran again."""

from __future__ import annotations

import asyncio
import time

import nats
import pytest
from nats.aio.client import Client

from tavern_loop.lease import Lease, LeaseKeeper, Leases, lease_key
from tavern_runtime.provision import provision

pytestmark = pytest.mark.integration


async def _leases(nats_url: str) -> tuple[Client, Leases]:
    nc = await nats.connect(nats_url)
    await provision(nc.jetstream())
    kv = await nc.jetstream().key_value("tavern_leases")
    return nc, Leases(kv, "holder-a")


async def test_release_deletes_our_lease_whose_revision_moved_on(nats_url: str) -> None:
    nc, leases = await _leases(nats_url)
    try:
        lease = await leases.acquire("s1")
        assert lease is not None
        # A renewal that landed but whose reply was lost: the server moved on, we did not.
        kv = await nc.jetstream().key_value("tavern_leases")
        await kv.update(lease_key("s1"), b"holder-a", last=lease.revision)
        await leases.release(lease)
        assert await leases.holder_of("s1") is None
        assert await leases.acquire("s1") is not None
    finally:
        await nc.close()


async def test_release_leaves_a_lease_another_holder_took(nats_url: str) -> None:
    nc, leases = await _leases(nats_url)
    try:
        lease = await leases.acquire("s2")
        assert lease is not None
        kv = await nc.jetstream().key_value("tavern_leases")
        await kv.update(lease_key("s2"), b"holder-b", last=lease.revision)
        await leases.release(lease)
        assert await leases.holder_of("s2") == "holder-b"
    finally:
        await nc.close()


class SlowLeases(Leases):
    """Renewals that take a while, so the keeper is stopped in the middle of one."""

    def __init__(self, inner: Leases) -> None:
        super().__init__(inner._kv, inner.holder)
        self.renewing = asyncio.Event()
        self.renewals = 0

    async def renew(self, lease: Lease) -> bool:
        self.renewing.set()
        await asyncio.sleep(0.3)
        self.renewals += 1
        return await super().renew(lease)


async def test_keeper_stop_lets_a_renewal_in_flight_land_and_then_stops(nats_url: str) -> None:
    nc, plain = await _leases(nats_url)
    leases = SlowLeases(plain)
    try:
        lease = await leases.acquire("s3")
        assert lease is not None
        keeper = LeaseKeeper(leases, lease, interval=0.05, ttl=10.0)
        keeper.start()
        await asyncio.wait_for(leases.renewing.wait(), 5)
        await asyncio.wait_for(keeper.stop(), 5)
        renewed = leases.renewals
        assert renewed == 1  # the renewal in flight finished, none started after the stop
        await asyncio.sleep(0.5)
        assert leases.renewals == renewed
        await leases.release(lease)  # the revision is current: the lease goes at once
        assert await leases.holder_of("s3") is None
    finally:
        await nc.close()


async def test_a_lease_knows_when_it_was_last_taken_or_renewed(nats_url: str) -> None:
    nc, leases = await _leases(nats_url)
    try:
        before = time.monotonic()
        lease = await leases.acquire("s4")
        assert lease is not None
        assert before <= lease.since <= time.monotonic()
        taken = lease.since
        assert await leases.renew(lease)
        assert lease.since > taken
        keeper = LeaseKeeper(leases, lease, interval=3.0, ttl=10.0)
        assert keeper.fresh()
    finally:
        await nc.close()
