"""Binding rules: defaults, create, mode switches at a turn boundary, forks, old bindings."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from tavern_events.session import SessionBindingChangedPayload, SessionCreated
from tavern_events.union import decode
from tavern_loop.domain.binding import (
    Fork,
    Refusal,
    created_binding,
    default_binding,
    fork_binding,
    mode_change,
)
from tavern_loop.domain.state import fold
from tavern_loop.options import ProfileOptions
from tests.unit.profiles.builders import Log

OFFERED = ProfileOptions()
UNAVAILABLE = ProfileOptions(projection_available=False)


def test_a_new_session_defaults_to_agent_tavern_dsh_native() -> None:
    payload = default_binding("s1", OFFERED)
    assert (payload.architecture, payload.context_mode, payload.chat_id) == (
        "agent-tavern",
        "dsh-native",
        "s1",
    )


def test_the_configured_default_architecture_applies_to_new_sessions_only() -> None:
    st = default_binding("s2", ProfileOptions(default_architecture="st"))
    assert (st.architecture, st.context_mode) == ("st", None)


def test_agent_managed_cannot_be_the_default_when_it_is_unavailable() -> None:
    with pytest.raises(ValueError, match="agent-managed is unavailable"):
        ProfileOptions(default_context_mode="agent-managed", compaction_cooperates=False)


def test_a_v1_binding_without_a_mode_reads_as_dsh_native() -> None:
    raw = {
        "id": "e1",
        "type": "session/created",
        "v": 1,
        "session_id": "s1",
        "seq": 1,
        "ts": datetime(2026, 1, 1, tzinfo=UTC).isoformat(),
        "payload": {"architecture": "agent-tavern", "chat_id": "c1"},
    }
    event = decode(json.dumps(raw).encode())
    assert isinstance(event, SessionCreated)
    assert event.payload.context_mode == "dsh-native"
    assert fold("s1", [event]).binding.context_mode == "dsh-native"


def test_create_takes_the_asked_binding() -> None:
    args = {"architecture": "st", "character_id": "mira", "persona_id": "ren"}
    payload = created_binding("s1", args, OFFERED)
    assert not isinstance(payload, Refusal)
    assert (payload.architecture, payload.context_mode) == ("st", None)
    assert (payload.character_id, payload.persona_id, payload.chat_id) == ("mira", "ren", "s1")


@pytest.mark.parametrize(
    ("args", "options", "reason"),
    [
        ({"architecture": "st", "context_mode": "dsh-native"}, OFFERED, "st sessions have no"),
        ({"context_mode": "agent-managed"}, UNAVAILABLE, "agent-managed is unavailable"),
        ({"architecture": "dsh"}, OFFERED, "architecture"),
        ({"character_id": "a.b"}, OFFERED, "character_id"),
        ({"colour": "red"}, OFFERED, "colour"),
    ],
)
def test_create_refuses_what_it_cannot_honour(
    args: dict[str, str], options: ProfileOptions, reason: str
) -> None:
    refused = created_binding("s1", args, options)
    assert isinstance(refused, Refusal)
    assert reason in refused.reason


def _session(architecture: str = "agent-tavern", **binding: str) -> Log:
    log = Log()
    log.created(architecture=architecture, **binding)
    log.turn(1)
    return log


def test_mode_switch_records_from_and_to() -> None:
    log = _session()
    changed = mode_change(fold("s1", log.events), {"context_mode": "agent-managed"}, OFFERED)
    assert isinstance(changed, SessionBindingChangedPayload)
    assert (changed.from_context_mode, changed.to_context_mode) == ("dsh-native", "agent-managed")
    assert changed.to_architecture == "agent-tavern"


def test_mode_switch_is_refused_mid_step() -> None:
    log = _session()
    state = fold("s1", log.events)
    assert state.open_turn is not None
    state.open_turn.step = 1
    refused = mode_change(state, {"context_mode": "agent-managed"}, OFFERED)
    assert refused == Refusal("the context mode changes only at an idle turn boundary")


@pytest.mark.parametrize(
    ("architecture", "asked", "options", "reason"),
    [
        ("st", "agent-managed", OFFERED, "st sessions have no context mode"),
        ("agent-tavern", "dsh-native", OFFERED, "already in dsh-native"),
        ("agent-tavern", "agent-managed", UNAVAILABLE, "the session stays in dsh-native"),
        ("agent-tavern", "fast", OFFERED, "context_mode"),
    ],
)
def test_mode_switch_refusals_explain_themselves(
    architecture: str, asked: str, options: ProfileOptions, reason: str
) -> None:
    log = _session(architecture)
    refused = mode_change(fold("s1", log.events), {"context_mode": asked}, options)
    assert isinstance(refused, Refusal)
    assert reason in refused.reason


def test_fork_keeps_character_and_persona_and_names_the_parent_at_its_boundary() -> None:
    log = _session(character_id="mira", persona_id="ren")
    before = log.events[-2].seq  # the session/created before turn 1 began
    fork = fork_binding(fold("s1", log.events), {"architecture": "st"}, OFFERED, "child1")
    assert isinstance(fork, Fork)
    created = fork.created
    assert fork.child_session_id == "child1"
    assert (created.architecture, created.context_mode, created.chat_id) == ("st", None, "child1")
    assert (created.character_id, created.persona_id) == ("mira", "ren")
    assert (created.parent_session_id, created.forked_at_seq) == ("s1", before)


def test_fork_to_agent_tavern_inherits_or_defaults_the_mode() -> None:
    st = fork_binding(
        fold("s1", _session("st").events), {"architecture": "agent-tavern"}, OFFERED, "c"
    )
    assert isinstance(st, Fork)
    assert st.created.context_mode == "dsh-native"
    managed = fork_binding(
        fold("s1", _session().events), {"context_mode": "agent-managed"}, UNAVAILABLE, "c"
    )
    assert isinstance(managed, Refusal)
    itself = fork_binding(fold("s1", _session().events), {"session_id": "s1"}, OFFERED, "c")
    assert itself == Refusal("/fork: a session cannot be its own fork")
