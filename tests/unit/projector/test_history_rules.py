"""History search bounds, scopes and shaping; requests; sessions fold; sources; restore."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tavern_events.parts import Usage
from tavern_events.rpc.projector import HISTORY_EXCERPT_CHARS_MAX
from tavern_events.turn import TurnEnded, TurnEndedPayload, TurnStarted, TurnStartedPayload
from tavern_projector import restore, sources
from tavern_projector.domain import history, requests, sessions
from tavern_projector.domain.memory import MemoryRow, StateChange, change_of
from tavern_projector.errors import BadRequest
from tavern_projector.runner import retry_delay
from tests.unit.projector.builders import at, created, replied, said

NOW = datetime(2026, 3, 2, tzinfo=UTC)


def test_requests_are_clamped_to_the_caps() -> None:
    request, tokens = history.parse_request(
        {
            "session_id": "s1",
            "query": "Lamp 灯塔",
            "limit": 999,
            "max_tokens": 0,
            "excerpt_chars": 10**9,
        }
    )
    assert (request.limit, request.max_tokens, tokens) == (100, 1, ["lamp", "灯塔"])
    assert request.excerpt_chars == HISTORY_EXCERPT_CHARS_MAX
    lore = history.validated(requests.LoreRequest, {"scan_depth": 5000, "limit": 0})
    assert (lore.scan_depth, lore.limit) == (100, 1)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "x"}, "session_id"),
        ({"session_id": "a.b", "query": "x"}, "session_id"),
        ({"session_id": "s1", "query": "?!"}, "query"),
        ({"session_id": "s1", "query": "x" * 2001}, "query"),
    ],
)
def test_bad_requests_name_the_field(body: dict[str, object], field: str) -> None:
    with pytest.raises(BadRequest, match=f"^{field}"):
        history.parse_request(body)


def test_scopes_follow_the_fork_lineage_when_allowed() -> None:
    lineage = [("p1", 7), ("p2", 3), ("p3", 2), ("p4", 1), ("p5", 1)]
    assert history.scopes("s1", lineage, parents=False) == [history.Scope("s1", None, 0)]
    found = history.scopes("s1", lineage, parents=True)
    assert [(s.session_id, s.max_seq, s.depth) for s in found][:3] == [
        ("s1", None, 0),
        ("p1", 7, 1),
        ("p2", 3, 2),
    ]
    assert len(found) == 1 + history.PARENT_DEPTH_MAX


def test_shape_stops_at_the_limit_or_the_budget_and_counts_the_rest() -> None:
    rows = [
        history.Row("s1", i, f"m{i}", "Mira/s1", "Ren", True, NOW, "lamp " + "x" * 396)
        for i in range(5)
    ]
    request, tokens = history.parse_request(
        {"session_id": "s1", "query": "lamp", "limit": 3, "max_tokens": 150}
    )
    found = history.shape(rows, tokens, request)
    assert [h["seq"] for h in found["hits"]] == [0, 1]
    assert (found["sourceCount"], found["truncated"]) == (5, True)
    assert found["hits"][0]["source"] == {"kind": "chat-history", "id": "s1#0"}


def test_bounded_text() -> None:
    assert requests.bounded("abcdef", 4) == ("abc…", True)
    assert requests.bounded("abc", 4) == ("abc", False)


def test_sessions_fold_counts_turns_tokens_and_activity() -> None:
    state = sessions.SessionSummary("s1")
    usage = Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15)
    events = [
        created(seq=1, character_id="mira"),
        TurnStarted(id="t", session_id="s1", seq=2, ts=at(2), turn=1, payload=TurnStartedPayload()),
        said("hi", 3),
        said("recall", 4, source="plugin:ledger"),
        replied("hello", 5),
        TurnEnded(
            id="e",
            session_id="s1",
            seq=6,
            ts=at(6),
            turn=1,
            payload=TurnEndedPayload(outcome="cancelled", steps=1, usage=usage),
        ),
    ]
    for event in [*events, *events]:
        sessions.apply(state, event)
    assert (state.character_id, state.turns, state.outcomes["cancelled"], state.open_turn) == (
        "mira",
        1,
        1,
        None,
    )
    assert (state.user_messages, state.assistant_messages, state.total_tokens) == (1, 1, 15)
    assert (state.last_seq, state.last_activity) == (6, at(6))


def test_narrowed_filters_and_wildcard_matching() -> None:
    assert sources.narrow(["tavern.session.*.user.message", "tavern.session.>"], "s1") == [
        "tavern.session.s1.user.message",
        "tavern.session.s1.>",
    ]
    assert sources.subject_matches(
        "tavern.session.*.user.message", "tavern.session.s1.user.message"
    )
    assert sources.subject_matches("tavern.session.>", "tavern.session.s1.turn.end")
    assert not sources.subject_matches(
        "tavern.session.*.user.message", "tavern.session.s1.user.chunk"
    )
    assert not sources.subject_matches("tavern.session.>", "tavern.session")


def test_restored_messages_keep_their_id_and_get_fresh_expectations() -> None:
    archived = {
        "Nats-Msg-Id": "e1",
        "Nats-Expected-Last-Subject-Sequence": "41",
        "Nats-Batch-Id": "b",
        "Nats-Batch-Sequence": "2",
        "x-trace": "t",
    }
    assert restore.restore_headers(archived, "s1", 7) == {
        "Nats-Msg-Id": "e1",
        "x-trace": "t",
        "Nats-Expected-Last-Subject-Sequence": "7",
        "Nats-Expected-Last-Subject-Sequence-Subject": "tavern.session.s1.>",
    }


def test_retry_delays_grow_and_cap() -> None:
    assert [retry_delay(n) for n in (1, 2, 3, 10)] == [0.5, 1.0, 2.0, 30.0]


def test_ledger_facts_become_index_changes() -> None:
    from tavern_events.ledger import (
        EvidenceStateChanged,
        EvidenceStateChangedPayload,
        MemoryChanged,
        MemoryChangedPayload,
    )

    forgot = MemoryChanged(
        id="f",
        scope_id="s1",
        ts=NOW,
        payload=MemoryChangedPayload(
            memory_id="m1", scope="chat", op="forgotten", content="x", revision="r2"
        ),
    )
    row = change_of(forgot)
    assert isinstance(row, MemoryRow)
    assert (row.content, row.state, row.tokens) == (
        None,
        "forgotten",
        [],
    )
    redact = EvidenceStateChanged(
        id="r",
        scope_id="s1",
        ts=NOW,
        payload=EvidenceStateChangedPayload(
            evidence_id="e1", from_state="active", to_state="redacted", reason="asked"
        ),
    )
    change = change_of(redact)
    assert isinstance(change, StateChange)
    assert change.redacts
