"""Provisioning against a real server: idempotent, drift reported (and fixed only on request)."""

from __future__ import annotations

import dataclasses

import pytest
from nats.js.api import ConsumerConfig, DeliverPolicy

from tavern_events import streams
from tavern_runtime.bus import NatsConnection
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.provision import LEASES, ConsumerSpec, provision, verify

pytestmark = pytest.mark.integration

PROJECTOR = ConsumerSpec(
    "projector",
    "SESSIONS",
    ("tavern.session.>",),
    max_deliver=5,
    backoff_s=(1.0, 5.0, 30.0),
    max_ack_pending=256,
)
ALL_RESOURCES = [f"stream {s.name}" for s in streams.ALL] + [
    "consumer SESSIONS/projector",
    "bucket tavern_leases",
]


async def test_provisioning_twice_changes_nothing(conn: NatsConnection) -> None:
    first = await provision(conn.js, consumers=[PROJECTOR])
    second = await provision(conn.js, consumers=[PROJECTOR])
    assert sorted(first.created) == sorted(ALL_RESOURCES)
    assert sorted(second.unchanged) == sorted(ALL_RESOURCES)
    assert (second.created, second.updated, second.drifted) == ([], [], [])
    assert second.ok


async def test_created_streams_match_the_contract(conn: NatsConnection) -> None:
    await provision(conn.js, consumers=[PROJECTOR])
    config = (await conn.js.stream_info("INPUTS")).config
    assert config.subjects == ["tavern.input.>"]
    assert config.max_age == streams.INPUTS.max_age_s
    assert (config.storage, config.retention) == ("file", "limits")
    assert (config.allow_direct, config.allow_atomic, config.deny_delete) == (True, True, True)
    consumer = (await conn.js.consumer_info("SESSIONS", "projector")).config
    assert (consumer.max_deliver, consumer.backoff, consumer.max_ack_pending) == (
        5,
        [1, 5, 30],
        256,
    )


async def test_hand_edited_stream_is_reported_as_drift_not_rewritten(conn: NatsConnection) -> None:
    await provision(conn.js)
    live = (await conn.js.stream_info("SESSIONS")).config
    await conn.js.update_stream(dataclasses.replace(live, max_age=3600.0))
    report = await provision(conn.js)
    assert not report.ok
    assert [(d.resource, d.field, d.expected, d.actual) for d in report.drifted] == [
        ("stream SESSIONS", "max_age", 0.0, 3600.0)
    ]
    assert (await conn.js.stream_info("SESSIONS")).config.max_age == 3600.0


async def test_apply_drift_rewrites_mutable_fields(conn: NatsConnection) -> None:
    await provision(conn.js, consumers=[PROJECTOR])
    live = (await conn.js.stream_info("DLQ")).config
    await conn.js.update_stream(dataclasses.replace(live, duplicate_window=30.0))
    consumer = (await conn.js.consumer_info("SESSIONS", "projector")).config
    await conn.js.add_consumer("SESSIONS", dataclasses.replace(consumer, max_deliver=9))
    fixed = await provision(conn.js, consumers=[PROJECTOR], apply_drift=True)
    assert sorted(fixed.updated) == ["consumer SESSIONS/projector", "stream DLQ"]
    assert fixed.ok
    assert (await conn.js.stream_info("DLQ")).config.duplicate_window == 120
    assert (await conn.js.consumer_info("SESSIONS", "projector")).config.max_deliver == 5
    assert (await provision(conn.js, consumers=[PROJECTOR])).ok


async def test_immutable_consumer_drift_stays_reported(conn: NatsConnection) -> None:
    await provision(conn.js)
    hand_made = dataclasses.replace(PROJECTOR.config(), deliver_policy=DeliverPolicy.NEW)
    await conn.js.add_consumer("SESSIONS", hand_made)
    report = await provision(conn.js, consumers=[PROJECTOR], apply_drift=True)
    assert [(d.field, d.mutable) for d in report.drifted] == [("deliver_policy", False)]
    assert report.updated == []
    live = (await conn.js.consumer_info("SESSIONS", "projector")).config
    assert live.deliver_policy == DeliverPolicy.NEW


async def test_hand_edited_bucket_ttl_is_drift(conn: NatsConnection) -> None:
    await provision(conn.js)
    live = (await conn.js.stream_info(LEASES.stream_name)).config
    await conn.js.update_stream(dataclasses.replace(live, max_age=300.0))
    report = await provision(conn.js)
    assert [(d.resource, d.field) for d in report.drifted] == [("bucket tavern_leases", "max_age")]


async def test_leases_bucket_expires_entries_and_checks_revisions(conn: NatsConnection) -> None:
    await provision(conn.js)
    kv = await conn.js.key_value(LEASES.name)
    revision = await kv.create("session.s1", b"replica-a")
    assert (await kv.get("session.s1")).value == b"replica-a"
    with pytest.raises(Exception, match="wrong last sequence"):
        await kv.create("session.s1", b"replica-b")
    assert await kv.update("session.s1", b"replica-a", last=revision) > revision
    assert (await conn.js.stream_info(LEASES.stream_name)).config.max_age == LEASES.ttl_s


async def test_verify_raises_on_missing_stream(conn: NatsConnection) -> None:
    with pytest.raises(ConfigurationError, match="stream SESSIONS does not exist"):
        await verify(conn.js, streams.SESSIONS)
    with pytest.raises(ConfigurationError, match="consumer projector does not exist"):
        await verify(conn.js, PROJECTOR)


async def test_verify_returns_drift_without_touching_it(conn: NatsConnection) -> None:
    await provision(conn.js, consumers=[PROJECTOR])
    assert await verify(conn.js, streams.SESSIONS) == []
    assert await verify(conn.js, PROJECTOR) == []
    consumer: ConsumerConfig = (await conn.js.consumer_info("SESSIONS", "projector")).config
    await conn.js.add_consumer("SESSIONS", dataclasses.replace(consumer, max_ack_pending=7))
    [drift] = await verify(conn.js, PROJECTOR)
    assert (drift.field, drift.expected, drift.actual) == ("max_ack_pending", 256.0, 7.0)


async def test_a_consumer_that_passes_over_gets_its_wider_filter_unasked(
    conn: NatsConnection,
) -> None:
    """An older, narrower filter of a consumer whose reader passes over what it does not apply
    is widened by the next provisioning; another consumer's filter stays reported drift."""
    narrow = ("tavern.session.*.user.message", "tavern.session.*.turn.end")
    older = dataclasses.replace(PROJECTOR, filter_subjects=narrow, passes_over=True)
    other = dataclasses.replace(PROJECTOR, name="other", filter_subjects=narrow)
    await provision(conn.js, consumers=[older, other])
    wide = dataclasses.replace(older, filter_subjects=("tavern.session.>",))
    report = await provision(
        conn.js, consumers=[wide, dataclasses.replace(other, filter_subjects=wide.filter_subjects)]
    )
    assert "consumer SESSIONS/projector" in report.updated
    assert [(d.resource, d.field) for d in report.drifted] == [
        ("consumer SESSIONS/other", "filter_subjects")
    ]
    live = (await conn.js.consumer_info("SESSIONS", "projector")).config
    assert (live.filter_subjects or [live.filter_subject]) == ["tavern.session.>"]
    assert (await provision(conn.js, consumers=[wide])).ok


async def test_a_flag_an_older_provisioning_left_off_is_turned_on(conn: NatsConnection) -> None:
    """An existing SESSIONS stream gets pipelined appends with the next provisioning; a hand
    edit beside it stays reported, not rewritten."""
    older = dataclasses.replace(streams.SESSIONS, extra={})
    await provision(conn.js, stream_specs=(older,), buckets=())
    live = (await conn.js.stream_info("SESSIONS")).config
    assert not live.allow_batched
    await conn.js.update_stream(dataclasses.replace(live, max_age=3600.0))
    report = await provision(conn.js)
    assert "stream SESSIONS" in report.updated
    assert [(d.field, d.expected) for d in report.drifted] == [("max_age", 0.0)]
    live = (await conn.js.stream_info("SESSIONS")).config
    assert (live.allow_batched, live.max_age) == (True, 3600.0)
    await conn.js.update_stream(dataclasses.replace(live, max_age=0.0))
    again = await provision(conn.js)
    assert again.ok
    assert "stream SESSIONS" in again.unchanged
