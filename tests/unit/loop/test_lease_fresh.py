"""A holder pipelines appends only while its lease has more than the margin left for certain:
measured from when the request that took or renewed it was sent."""

from __future__ import annotations

import time
from typing import cast

from tavern_loop.lease import Lease, LeaseKeeper, Leases
from tavern_runtime.sessionlog import BATCH_TIMEOUT_S, PIPELINE_LEASE_MARGIN_S

TTL = 10.0


def keeper(sent_ago: float | None) -> LeaseKeeper:
    since = 0.0 if sent_ago is None else time.monotonic() - sent_ago
    lease = Lease("s1", "replica-a", revision=3, since=since)
    return LeaseKeeper(cast(Leases, None), lease, interval=TTL / 3, ttl=TTL)


def test_the_margin_outlasts_the_servers_batch_timeout() -> None:
    assert PIPELINE_LEASE_MARGIN_S > BATCH_TIMEOUT_S


def test_a_lease_just_taken_or_renewed_is_fresh() -> None:
    assert keeper(sent_ago=0.0).fresh()
    assert keeper(sent_ago=TTL / 3).fresh()  # due for renewal: still well inside the margin


def test_a_lease_whose_renewal_is_late_is_not() -> None:
    assert not keeper(sent_ago=TTL - PIPELINE_LEASE_MARGIN_S + 0.5).fresh()
    assert not keeper(sent_ago=TTL + 1).fresh()


def test_a_lease_of_unknown_age_is_not() -> None:
    assert not keeper(sent_ago=None).fresh()
