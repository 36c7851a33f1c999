"""The agent-tavern tools against the real projector and ledger, in both context modes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tavern_events.envelope import SessionEvent
from tavern_loop.options import ProfileOptions
from tavern_loop.tools.policy import BULK_REFUSED, GLOBAL_REFUSED, profile_tools
from tavern_loop.tools.tavern_tools import history_search
from tavern_runtime.cards import importer
from tests.integration.ledger.stores.conftest import Ledger
from tests.integration.loop.checks import RecordingProvider, of_type, recording_router
from tests.integration.profiles.conftest import command, requests
from tests.integration.profiles.test_requests import filler
from tests.integration.projector.conftest import Projector
from tests.support import eventually

pytestmark = pytest.mark.integration

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"
SUMMARY = "Mira: the keeper's apprentice at Cael Point; patient and wry."


async def card_with_summary(projector: Projector, tmp_path: Path) -> str:
    card = json.loads((CARDS / "v2_mira.json").read_text())
    card["data"]["extensions"]["agentTavern"] = {"identitySummary": SUMMARY}
    path = tmp_path / "mira_summary.json"
    path.write_text(json.dumps(card))
    published = await importer.import_file(projector.bus.js, path, projector.settings.data_dir)
    await projector.caught_up("assets")
    return published.asset.asset_id


def results(events: list[SessionEvent], turn: int) -> dict[str, Any]:
    """Tool results of a turn by tool name: (ok, parsed content or error)."""
    found: dict[str, Any] = {}
    for event in of_type(events, "tool/result"):
        if event.turn == turn:
            p = event.payload
            found[p.name] = json.loads(p.content) if p.ok else (p.error.code, p.error.message)
    return found


async def projected(projector: Projector, session_id: str) -> bool:
    """Whether the projector's sessions read model has the session yet."""
    found = await projector.pool.fetchval(
        "SELECT 1 FROM projector.sessions WHERE session_id = $1", session_id
    )
    return found is not None


async def test_tools_work_in_both_modes_and_switching_keeps_every_store(
    projector: Projector, ledger: Ledger, tmp_path: Path
) -> None:
    bus = projector.bus
    character = await card_with_summary(projector, tmp_path)
    await bus.engine(tools=profile_tools(ProfileOptions()))
    await command(bus, "t1", "create", character_id=character)
    await bus.turns_ended("t1", 1)
    await eventually(lambda: ledger.binding("t1"), timeout=10)
    # The scene is the projector's read model, which takes a turn's events in batches gathered
    # for a moment (TAVERN_PROJECTOR_GATHER_S): wait until it has the session.
    await eventually(lambda: projected(projector, "t1"), timeout=10)
    await bus.say(
        "t1",
        'call tavern_character_get with {"fields": ["name", "personality"]} '
        'call tavern_lore_search with {"query": "the lighthouse"} '
        "call tavern_scene_get with {} "
        'call memory_write with {"content": "Ren keeps a brass key", "scope": "chat"} '
        'call variable_set with {"scope": "chat", "name": "hp", "value": 10}',
    )
    events = await bus.turns_ended("t1", 2)
    assert f"Identity: {SUMMARY}" in requests(events)[0].payload.params["system"]
    native = results(events, 2)
    assert native["tavern_character_get"]["fields"] == {
        "name": "Mira",
        "personality": "patient, curious, wry",
    }
    assert native["tavern_character_get"]["source"]["revision"]
    lore = native["tavern_lore_search"]
    assert [e["content"][:30] for e in lore["entries"]] == ["The Cael Point lighthouse has "]
    assert (lore["sourceCount"], lore["truncated"]) == (1, False)
    assert native["tavern_scene_get"]["contextMode"] == "dsh-native"
    assert native["memory_write"]["scope"] == "chat"
    assert native["variable_set"]["revision"] == 1

    await command(bus, "t1", "mode", context_mode="agent-managed")
    await projector.caught_up("history")
    await bus.say(
        "t1",
        'call memory_search with {"query": "brass key"} '
        'call variable_get with {"scope": "chat", "name": "hp"} '
        'call tavern_history_search with {"query": "brass key", "limit": 3} '
        'call acp_query with {"limit": 5} '
        'call tavern_lore_search with {"query": "keeper in the storm"}',
    )
    events = await bus.turns_ended("t1", 4)
    managed = results(events, 4)
    assert [h["content"] for h in managed["memory_search"]["hits"]] == ["Ren keeps a brass key"]
    assert (managed["variable_get"]["value"], managed["variable_get"]["revision"]) == (10, 1)
    hits = managed["tavern_history_search"]["hits"]
    assert hits
    assert all(h["source"]["kind"] == "chat-history" for h in hits)
    assert set(managed["acp_query"]) == {"items", "sourceCount", "truncated", "observations"}
    lore_hits = [e["content"] for e in managed["tavern_lore_search"]["entries"]]
    assert any("Old Tamsin" in text for text in lore_hits)
    assert of_type(events, "request/projection"), "the same tools, now in agent-managed"


async def test_refusals_explain_themselves(projector: Projector, ledger: Ledger) -> None:
    bus = projector.bus
    await bus.engine(tools=profile_tools(ProfileOptions()))
    await bus.say("r1", "hello")
    await bus.turns_ended("r1", 1)
    await bus.say(
        "r1",
        'call memory_write with {"scope": "global", "content": "the sky is green"} '
        'call variable_patch with {"scope": "chat", "expectedRevision": 0, "changes": '
        '[{"name": "a", "delete": true}, {"name": "b", "delete": true}]} '
        'call tavern_history_search with {"query": "hello", "session_id": "someone-else"} '
        'call tavern_lore_search with {"query": "x", "limit": 999} '
        'call variable_get with {"scope": "character", "name": "hp"} '
        'call tavern_character_get with {"kind": "persona"}',
    )
    events = await bus.turns_ended("r1", 2)
    refused = results(events, 2)
    assert refused["memory_write"] == ("FORBIDDEN", GLOBAL_REFUSED)
    assert refused["variable_patch"] == ("FORBIDDEN", BULK_REFUSED)
    code, message = refused["tavern_history_search"]
    assert code == "INVALID_ARGS"
    assert "'session_id' was unexpected" in message
    code, message = refused["tavern_lore_search"]
    assert (code, "999 is greater than the maximum of 100" in message) == ("INVALID_ARGS", True)
    code, message = refused["variable_get"]
    assert (code, "(scope_unavailable)" in message) == ("not_found", True), "no character scope"
    assert refused["tavern_character_get"] == ("NOT_BOUND", "this session has no persona bound")


async def test_history_left_out_of_requests_stays_searchable_and_in_the_chat(
    projector: Projector,
) -> None:
    bus, model = projector.bus, RecordingProvider(window=3_000)
    await bus.engine(router=recording_router(model), tools=[history_search()])
    await command(bus, "h1", "create", context_mode="agent-managed")
    for turn in range(2, 12):
        await bus.say("h1", filler(turn))
        await bus.turns_ended("h1", turn)
    events = await bus.log("h1")
    last = of_type(events, "request/projection")[-1].payload
    users = {e.seq: e for e in of_type(events, "user/message") if e.source == "user"}
    left_out = sorted(set(users) - set(last.included_seqs))
    assert left_out, "the last request left older turns out"
    marker = next(w for w in users[left_out[0]].payload.text.split() if w.startswith("quokka"))
    await projector.caught_up("history", "chat")
    await bus.say("h1", f'call tavern_history_search with {{"query": "{marker.rstrip(".")}"}}')
    events = await bus.turns_ended("h1", 12)
    hits = results(events, 12)["tavern_history_search"]["hits"]
    assert left_out[0] in [h["seq"] for h in hits], "found although it was left out"
    row = await projector.chat_row("h1")
    lines = projector.chat_file(row["chat_key"]).read_text().splitlines()[1:]
    assert [json.loads(line)["mes"] for line in lines[0:20:2]] == [filler(t) for t in range(2, 12)]


async def test_a_fork_in_another_architecture_still_searches_its_parents_chat(
    projector: Projector,
) -> None:
    bus = projector.bus
    await bus.engine(tools=[history_search()])
    await command(bus, "parent", "create", architecture="st")
    await bus.say("parent", "The wombat sleeps in the lamp room.")
    await bus.turns_ended("parent", 2)
    await command(bus, "parent", "fork", session_id="child", architecture="agent-tavern")
    await bus.turns_ended("parent", 3)
    await projector.caught_up("history", "sessions")
    await bus.say("child", 'call tavern_history_search with {"query": "wombat lamp"}')
    events = await bus.turns_ended("child", 1)
    hits = results(events, 1)["tavern_history_search"]["hits"]
    assert [h["source"]["id"].split("#")[0] for h in hits][-2:] == ["parent", "parent"]


async def test_acp_query_is_audited_reads_every_state_and_is_never_remembered(
    projector: Projector, ledger: Ledger
) -> None:
    bus = projector.bus
    await bus.engine(tools=profile_tools(ProfileOptions()))
    await bus.say("q1", "I keep the spare key in the blue teapot")
    await bus.turns_ended("q1", 1)
    [row] = await eventually(lambda: _evidence(ledger, "q1", "blue teapot"), timeout=10)
    await ledger.call("quarantine", {"evidence_id": row["id"], "reason": "needs_review"})
    await ledger.call(
        "observation.propose",
        {"scope_id": row["scope_id"], "subject": "spare key", "predicate": "kept in",
         "claim_domain": "user_fact", "text": "the blue teapot", "evidence_ids": [row["id"]]},
    )  # fmt: skip
    await bus.say(
        "q1",
        'call acp_query with {"text": "teapot"} '
        'call acp_query with {"text": "teapot", "state": "all"}',
    )
    events = await bus.turns_ended("q1", 2)
    answers = [
        json.loads(e.payload.content)
        for e in of_type(events, "tool/result")
        if e.turn == 2 and e.payload.name == "acp_query"
    ]
    [active, every] = answers  # in the order the model called them
    assert row["id"] not in [i["source"]["id"] for i in active["items"]]  # it is quarantined
    assert row["id"] in [i["source"]["id"] for i in every["items"]]
    assert [o["text"] for o in every["observations"]] == ["the blue teapot"]

    audited = await ledger.call("audit", {"op": "model_query", "limit": 10})
    assert len(audited["items"]) == 2
    assert {(e["actor"], e["reason"]) for e in audited["items"]} == {("model", "acp_query tool")}
    assert {e["payload"]["state"] for e in audited["items"]} == {"active", "all"}

    await eventually(lambda: _ingested(ledger), timeout=10)
    echoed = await ledger.db.fetch(
        "SELECT id FROM ledger.evidence WHERE session_id = 'q1' AND source_class = 'external_tool'"
    )
    assert echoed == []  # the tool's answer repeats memory: it never becomes evidence


async def _evidence(ledger: Ledger, session_id: str, text: str) -> list[dict[str, Any]]:
    rows = await ledger.db.fetch(
        "SELECT id, scope_id FROM ledger.evidence WHERE session_id = $1 AND content LIKE $2 "
        "AND claim_of IS NULL",  # the message, kept whole beside its claims
        session_id,
        f"%{text}%",
    )
    return [dict(r) for r in rows]


async def _ingested(ledger: Ledger) -> bool:
    """Ingestion took every session event so far (the acp_query results among them)."""
    info = await ledger.js.consumer_info("SESSIONS", "ledger-ingest")
    return bool(info.num_pending == 0 and info.num_ack_pending == 0)
