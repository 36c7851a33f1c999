"""Pure parts of provisioning: expected configs and drift comparison."""

from __future__ import annotations

from dataclasses import replace

import pytest
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy, StorageType, StreamConfig

from tavern_events import streams
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.provision import (
    CONSUMER_FIELDS,
    STREAM_FIELDS,
    ConsumerSpec,
    Drift,
    ProvisionReport,
    compare,
    stream_config,
    stream_fields,
    turns_on,
    with_fixes,
)


def as_server_returns(config: StreamConfig) -> StreamConfig:
    """What stream_info reports for a stream created from `config` (defaults filled in)."""
    return replace(config, max_consumers=-1, allow_atomic=config.allow_atomic or None)


def test_stream_config_follows_the_contract_spec() -> None:
    config = stream_config(streams.INPUTS, replicas=3)
    assert config.subjects == ["tavern.input.>"]
    assert config.storage == StorageType.FILE
    assert config.num_replicas == 3
    assert config.max_age == 7 * 24 * 3600
    assert (config.allow_direct, config.allow_atomic, config.deny_delete) == (True, True, True)


def test_stream_config_applies_extra_fields() -> None:
    spec = replace(streams.LEDGER, extra={"max_msg_size": 1024})
    assert stream_config(spec).max_msg_size == 1024
    assert "max_msg_size" in stream_fields(spec)


def test_identical_stream_has_no_drift() -> None:
    expected = stream_config(streams.SESSIONS)
    assert compare("stream SESSIONS", STREAM_FIELDS, expected, as_server_returns(expected)) == []


def test_subject_order_and_absent_flags_are_not_drift() -> None:
    spec = replace(streams.SESSIONS, subjects=("a.>", "b.>"), allow_atomic=False)
    expected = stream_config(spec)
    actual = replace(expected, subjects=["b.>", "a.>"], allow_atomic=None)
    assert compare("s", STREAM_FIELDS, expected, actual) == []


def test_changed_max_age_is_reported_with_both_values() -> None:
    expected = stream_config(streams.SESSIONS)
    actual = replace(expected, max_age=3600.0)
    [drift] = compare("stream SESSIONS", STREAM_FIELDS, expected, actual)
    assert (drift.field, drift.expected, drift.actual, drift.mutable) == (
        "max_age",
        0.0,
        3600.0,
        True,
    )
    assert "max_age expected 0.0, actual 3600.0" in str(drift)


def test_changed_storage_is_immutable_drift() -> None:
    expected = stream_config(streams.SESSIONS)
    [drift] = compare("s", STREAM_FIELDS, expected, replace(expected, storage=StorageType.MEMORY))
    assert drift.field == "storage"
    assert drift.actual == "memory"
    assert not drift.mutable


def test_with_fixes_changes_only_mutable_drifted_fields() -> None:
    expected = stream_config(streams.SESSIONS)
    actual = replace(expected, max_age=60.0, storage=StorageType.MEMORY, max_msgs=5)
    fixed = with_fixes(actual, expected, compare("s", STREAM_FIELDS, expected, actual))
    assert fixed.max_age == 0
    assert fixed.storage == StorageType.MEMORY  # the server would refuse; we don't try
    assert fixed.max_msgs == 5  # unmanaged fields stay as they are


def test_consumer_spec_uses_first_backoff_step_as_ack_wait() -> None:
    spec = ConsumerSpec("p", "SESSIONS", ("tavern.session.>",), max_deliver=4, backoff_s=(1, 5))
    config = spec.config()
    assert config.ack_wait == 1
    assert config.backoff == [1, 5]
    assert config.ack_policy == AckPolicy.EXPLICIT
    assert config.durable_name == "p"


def test_consumer_spec_refuses_more_backoff_steps_than_deliveries() -> None:
    with pytest.raises(ConfigurationError):
        ConsumerSpec("p", "SESSIONS", ("x.>",), max_deliver=2, backoff_s=(1, 2))


def test_consumer_single_filter_subject_matches_a_one_item_list() -> None:
    spec = ConsumerSpec("p", "S", ("x.>",))
    actual = replace(spec.config(), filter_subjects=None, filter_subject="x.>")
    assert compare("c", CONSUMER_FIELDS, spec.config(), actual) == []


def test_consumer_deliver_policy_change_is_immutable_drift() -> None:
    spec = ConsumerSpec("p", "S", ("x.>",))
    actual: ConsumerConfig = replace(spec.config(), deliver_policy=DeliverPolicy.NEW, max_deliver=9)
    drifts = {d.field: d for d in compare("c", CONSUMER_FIELDS, spec.config(), actual)}
    assert set(drifts) == {"deliver_policy", "max_deliver"}
    assert not drifts["deliver_policy"].mutable
    assert drifts["max_deliver"].mutable


def test_report_is_ok_only_without_drift_or_refusal() -> None:
    report = ProvisionReport(created=["stream A"], unchanged=["stream B"])
    assert report.ok
    assert report.lines() == ["created    stream A", "unchanged  stream B"]
    report.refused.append("stream C: no")
    assert not report.ok


def test_only_an_enabling_flag_is_turned_on_without_asking() -> None:
    on = Drift("stream SESSIONS", "allow_batched", True, False, mutable=True)
    assert turns_on(on)
    assert not turns_on(replace(on, expected=False, actual=True))  # never turned off
    assert not turns_on(replace(on, field="allow_atomic"))  # asked for, as before
    assert not turns_on(replace(on, field="max_age", expected=0.0, actual=3600.0))
