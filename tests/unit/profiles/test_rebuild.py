"""`rebuild_request`: the exact request from the log alone, for each profile."""

from __future__ import annotations

import pytest

from tavern_events.request import (
    AgentRequest,
    AgentRequestPayload,
    RequestProjection,
    RequestProjectionPayload,
)
from tavern_loop.domain.groupchat import others_recall
from tavern_loop.domain.history import derive_messages, surface_of
from tavern_loop.domain.projection import Budget, project, query_of, select
from tavern_loop.domain.rebuild import RebuildError, rebuild_request
from tavern_loop.options import ProjectionOptions
from tests.unit.profiles.builders import Log


def request(log: Log, **params: object) -> int:
    payload = AgentRequestPayload(
        provider="offline",
        model="offline-1",
        offline=True,
        message_count=0,
        token_estimate=0,
        params={"system": "kernel", **params},
    )
    return log.add(AgentRequest, payload).seq


def conversation(turns: int) -> Log:
    log = Log()
    log.created()
    for turn in range(1, turns + 1):
        log.turn(turn)
        log.user(f"question {turn} " + "words " * 60)
        log.reply(f"answer {turn} " + "words " * 60)
    log.turn(turns + 1)
    log.user("and the first question?")
    return log


def test_dsh_native_rebuilds_the_whole_surface() -> None:
    log = conversation(3)
    seq = request(log)
    assert rebuild_request(log.events, seq) == [
        {"role": "system", "content": "kernel"},
        *derive_messages(log.events),
    ]


def test_agent_managed_rebuilds_through_the_recorded_projection() -> None:
    log = conversation(8)
    nodes = surface_of(log.events).nodes()
    chosen = select(nodes, 9, query_of(nodes, 9), Budget(2000, 100, ProjectionOptions()))
    payload = RequestProjectionPayload(
        included_seqs=chosen.included,
        required_seqs=chosen.required,
        surface_generation=0,
        budget_tokens=chosen.budget_tokens,
        token_estimate=chosen.token_estimate,
    )
    log.add(RequestProjection, payload)
    seq = request(log)
    rebuilt = rebuild_request(log.events, seq)
    assert rebuilt[1:] == project(nodes, chosen.included)
    assert len(rebuilt) - 1 < len(derive_messages(log.events)), "history was left out"
    later = request(log)
    assert rebuild_request(log.events, later)[1:] == derive_messages(log.events), (
        "a projection belongs to one request"
    )


def test_a_projection_on_another_surface_generation_is_refused() -> None:
    log = conversation(2)
    payload = RequestProjectionPayload(
        included_seqs=(log.events[-1].seq,),
        surface_generation=3,
        budget_tokens=100,
        token_estimate=10,
    )
    log.add(RequestProjection, payload)
    seq = request(log)
    with pytest.raises(RebuildError, match="surface generation"):
        rebuild_request(log.events, seq)


def test_st_rebuilds_from_the_recorded_parts_and_the_chat() -> None:
    log = Log()
    log.created(architecture="st")
    log.turn(1)
    first = log.user("Hello")
    reply = log.reply("Hi.")
    log.turn(2)  # a swipe turn: no user message, the reply is left out of the history
    record = {
        "first": first.seq,
        "last": first.seq,
        "depth": [{"depth": 0, "role": "system", "content": "note"}],
        "after": [{"role": "system", "content": "after"}],
    }
    seq = request(log, st=record)
    assert rebuild_request(log.events, seq) == [
        {"role": "system", "content": "kernel"},
        {"role": "user", "content": "Hello"},
        {"role": "system", "content": "note"},
        {"role": "system", "content": "after"},
    ]
    assert reply.seq not in (record["first"], record["last"])


def test_only_an_agent_request_can_be_rebuilt() -> None:
    log = conversation(1)
    with pytest.raises(RebuildError, match="not an agent/request"):
        rebuild_request(log.events, 1)
    with pytest.raises(RebuildError, match="no seq 99"):
        rebuild_request(log.events, 99)


def test_a_member_request_leaves_out_the_recall_made_for_another_member() -> None:
    log = Log()
    log.created()
    log.turn(1)
    log.user("who is on watch?")
    mine = "[recall] Cael's own: the tide table"
    shared = "[recall] the group's: the bell rang"
    log.user("[recall] Mira's own: her sister", source="plugin:ledger", form="recall", actor_id="m")
    log.user(shared, source="plugin:ledger", form="recall", actor_id="m")
    log.user(shared, source="plugin:ledger", form="recall", actor_id="c")
    log.user(mine, source="plugin:ledger", form="recall", actor_id="c")
    assert others_recall(log.events, "c") == {"[recall] Mira's own: her sister"}
    own = request(log, speaker="Cael", speaker_id="c")
    texts = [m["content"] for m in rebuild_request(log.events, own)]
    assert texts == ["kernel", "who is on watch?", shared, shared, mine]
    # A request recorded without `speaker_id` (reach `group`, or before it) shows every recall.
    every = request(log, speaker="Cael")
    assert len(rebuild_request(log.events, every)) == 6
