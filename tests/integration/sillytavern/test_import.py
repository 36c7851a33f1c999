"""`tavern st import` of a folder SillyTavern wrote: chats become sessions that continue."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tavern_events.group import GroupBinding
from tavern_projector.domain.groupdef import file_id
from tavern_runtime import chatimport, stchat
from tavern_runtime.cards import cards, png
from tests.integration.ledger.stores.conftest import Ledger
from tests.integration.loop.checks import RecordingProvider, of_type, recording_router
from tests.integration.profiles.conftest import command
from tests.integration.projector.conftest import Projector
from tests.integration.projector.test_cli import tavern
from tests.support import eventually, signed_user

pytestmark = pytest.mark.integration

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "sillytavern" / "default-user"
LONG = "chats/default_Mira/Mira - 2026-12-01@21h20m05s.jsonl"


def session_of(relative: str) -> str:
    path = FIXTURE / relative
    chat = stchat.parse_chat(path.read_bytes())
    return chatimport.session_id_for(f"{path.parent.name}/{path.name}", chat)


async def chat_file(projector: Projector, session_id: str) -> list[dict[str, Any]]:
    await projector.caught_up("chat")
    row = await projector.chat_row(session_id)
    text = projector.chat_file(row["chat_key"]).read_text()
    return [json.loads(line) for line in text.splitlines()]


def unmarked(line: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(json.dumps(line))
    found.get("extra", {}).pop("agentTavern", None)
    found.get("chat_metadata", {}).pop("agentTavern", None)
    return found


async def imported_folder(projector: Projector, tmp_path: Path, *options: str) -> str:
    folder = tmp_path / "default-user"
    shutil.copytree(FIXTURE, folder)
    code, out = await tavern(
        projector, "st", "import", str(folder), "--timezone", "Europe/Berlin", *options
    )
    assert code == 0, out
    return out


async def test_a_user_folder_is_imported_then_skipped_on_a_second_run(
    projector: Projector, tmp_path: Path
) -> None:
    out = await imported_folder(projector, tmp_path)
    assert "character 'Mira'" in out
    assert "lorebook 'Cael Point'" in out
    assert "persona 'Ren'" in out
    assert "persona 'Keeper'" in out
    assert "8 lines as session" in out
    assert "1 lines as session" in out
    assert "group 'Mira and Tamsin': 1 members, read for its 1 chats" in out
    assert "2 lines as session" in out, "the group chat"
    assert "7 imported, 1 skipped, 0 refused" in out
    session_id = session_of(LONG)
    log = await projector.bus.log(session_id)
    assert [e.type for e in log[:3]] == ["session/created", "turn/start", "chat/imported"]
    assert [e.type for e in log[-2:]] == ["turn/stopping", "turn/end"]
    assert log[0].payload.character_id is not None, "bound to the imported card"
    assert log[0].payload.architecture == "st"

    lines = await chat_file(projector, session_id)
    row = await projector.chat_row(session_id)
    assert row["chat_key"] == f"default_Mira/{session_id}", "SillyTavern's folder: the card stem"
    original = [json.loads(x) for x in (FIXTURE / LONG).read_text().split("\n")]
    assert [unmarked(line) for line in lines] == original

    code, again = await tavern(projector, "st", "import", str(tmp_path / "default-user"))
    assert code == 0, again
    assert "0 imported, 8 skipped, 0 refused" in again
    assert "already imported as session" in again
    assert len(await projector.bus.log(session_id)) == len(log), "nothing appended"


async def test_an_imported_chat_continues_in_st_with_its_history(
    projector: Projector, tmp_path: Path
) -> None:
    await imported_folder(projector, tmp_path)
    session_id = session_of(LONG)
    model = RecordingProvider()
    await projector.bus.engine(router=recording_router(model))
    await projector.bus.say(session_id, "Then I will wait for the thaw.")
    log = await projector.bus.turns_ended(session_id, 2)
    sent = model.chat()[0]
    assert sent[1:] == [
        {"role": "assistant", "content": "The lamp flickers as you step in."},
        {"role": "user", "content": "Is anyone here? I saw the lamp from the shore."},
        {
            "role": "assistant",
            "content": "Only me and the keeper. Come in out of the rain, and mind the steps.",
        },
        {"role": "assistant", "content": "Who is tracking water across my floor?"},
        {"role": "user", "content": "Does the ferry still run in winter?"},
        {"role": "assistant", "content": "The ferry? Not in this ice."},
        {"role": "user", "content": "Then I will wait for the thaw."},
    ], "hidden and narrator lines stay out; the chosen swipes are in"
    lines = await chat_file(projector, session_id)
    assert len(lines) == 1 + 8 + 2
    assert lines[-2]["mes"] == "Then I will wait for the thaw."
    assert lines[-1]["mes"] == of_type(log, "assistant/message")[-1].payload.content

    await command(projector.bus, session_id, "swipe")
    await projector.bus.turns_ended(session_id, 3)
    lines = await chat_file(projector, session_id)
    assert len(lines[-1]["swipes"]) == 2
    assert lines[-1]["swipe_id"] == 1

    grown = tmp_path / "default-user" / LONG
    more = {"name": "Ren", "is_user": True, "send_date": "December 2, 2026 1:00am", "mes": "x"}
    grown.write_text(grown.read_text() + "\n" + json.dumps(more))
    code, out = await tavern(projector, "st", "import", str(grown))
    assert code == 1, "continued here: SillyTavern's new lines are not merged in"
    assert "changed since it was imported" in out


async def test_an_imported_chat_continues_in_agent_tavern(
    projector: Projector, tmp_path: Path
) -> None:
    await imported_folder(projector, tmp_path, "--architecture", "agent-tavern")
    session_id = session_of(LONG)
    log = await projector.bus.log(session_id)
    assert (log[0].payload.architecture, log[0].payload.context_mode) == (
        "agent-tavern",
        "dsh-native",
    )
    model = RecordingProvider()
    await projector.bus.engine(router=recording_router(model))
    await projector.bus.say(session_id, "Is there tea?")
    await projector.bus.turns_ended(session_id, 2)
    texts = [m.get("content") for m in model.chat()[0]]
    assert "Does the ferry still run in winter?" in texts
    assert "(OOC: skip the old woman for now)" not in texts, "a hidden line"
    assert texts[-1] == "Is there tea?"


async def test_imported_user_lines_enter_the_ledger_with_their_original_dates(
    projector: Projector, ledger: Ledger, tmp_path: Path
) -> None:
    await imported_folder(projector, tmp_path)
    session_id = session_of(LONG)

    async def rows() -> list[Any] | None:
        found = await ledger.db.fetch(
            "SELECT content, observed_at FROM ledger.evidence WHERE session_id = $1"
            " AND claim_of IS NULL ORDER BY observed_at",  # the messages, kept whole
            session_id,
        )
        return found if len(found) >= 2 else None

    found = await eventually(rows, timeout=20)
    assert [(r["content"], r["observed_at"]) for r in found] == [
        (
            "Is anyone here? I saw the lamp from the shore.",
            datetime(2026, 12, 1, 20, 22, tzinfo=UTC),
        ),
        ("Does the ferry still run in winter?", datetime(2026, 12, 1, 20, 30, tzinfo=UTC)),
    ]


async def test_a_new_chat_with_an_imported_card_is_filed_under_its_file_stem(
    projector: Projector, tmp_path: Path
) -> None:
    await imported_folder(projector, tmp_path)
    (card,) = [row async for row in _characters(projector)]
    await projector.bus.engine()
    await command(projector.bus, "fresh", "create", architecture="st", character_id=card)
    await projector.bus.say("fresh", "Hello?")
    await projector.bus.turns_ended("fresh", 2)
    await projector.caught_up("chat")
    row = await projector.chat_row("fresh")
    assert row["chat_key"] == "default_Mira/fresh"
    lines = projector.chat_file(row["chat_key"]).read_text().splitlines()
    assert json.loads(lines[1])["mes"] == "The door creaks open.", "the greeting first"


async def _characters(projector: Projector) -> Any:
    async with projector.pool.acquire() as conn:
        for row in await conn.fetch("SELECT asset_id FROM projector.characters"):
            yield row["asset_id"]


async def test_a_single_file_and_a_refused_one_are_reported(
    projector: Projector, tmp_path: Path
) -> None:
    broken = tmp_path / "default_Mira"
    broken.mkdir()
    shutil.copy(FIXTURE / LONG, broken / "good.jsonl")
    (broken / "bad.jsonl").write_text('{"user_name":"Ren","character_name":"Mira"}\n{"mes":')
    code, out = await tavern(projector, "st", "import", str(broken))
    assert code == 1, "a refusal is an error exit"
    assert "refused chat default_Mira/bad.jsonl: line 2: not JSON" in out
    assert "1 imported, 0 skipped, 1 refused" in out

    more = {"name": "Ren", "is_user": True, "send_date": "December 2, 2026 1:00am", "mes": "more"}
    grown = (FIXTURE / LONG).read_text() + "\n" + json.dumps(more)
    (broken / "good.jsonl").write_text(grown)
    code, out = await tavern(projector, "st", "import", str(broken / "good.jsonl"))
    assert code == 0, out
    assert "1 new lines after the 8 imported before" in out, "a chat that grew in SillyTavern"
    session_id = chatimport.session_id_for(
        "default_Mira/good.jsonl", stchat.parse_chat((FIXTURE / LONG).read_bytes())
    )
    log = await projector.bus.log(session_id)
    assert [e.type for e in log[-5:]] == [
        "turn/start",
        "chat/imported",
        "user/message",
        "turn/stopping",
        "turn/end",
    ]
    assert log[-3].payload.text == "more"
    lines = await chat_file(projector, session_id)
    assert lines[-1]["mes"] == "more"
    assert len(lines) == 1 + 9

    edited = grown.replace("Is anyone here?", "Hello? Is anyone here?")
    (broken / "good.jsonl").write_text(edited)
    code, out = await tavern(projector, "st", "import", str(broken / "good.jsonl"))
    assert code == 1
    assert "changed since it was imported" in out
    assert "(9 lines then, 9 now)" in out
    assert len(await projector.bus.log(session_id)) == len(log), "nothing was changed"


async def test_an_export_is_a_sillytavern_folder_with_the_files_it_would_write(
    projector: Projector, tmp_path: Path
) -> None:
    await imported_folder(projector, tmp_path)
    await projector.caught_up("chat", "assets")
    out_dir = tmp_path / "exported"
    code, out = await tavern(projector, "st", "export", str(out_dir))
    assert code == 0, out
    assert "exported 1 characters, 3 chats, 1 groups, 1 worlds, 2 personas" in out

    card = (out_dir / "characters" / "default_Mira.png").read_bytes()
    original = (FIXTURE / "characters" / "default_Mira.png").read_bytes()
    assert [c for c in png.read_chunks(card) if c.kind != b"tEXt"] == [
        c for c in png.read_chunks(original) if c.kind != b"tEXt"
    ], "the card's own image"
    assert cards.decode_file(card).name == "Mira"

    session_id = session_of(LONG)
    exported = (out_dir / "chats" / "default_Mira" / f"{session_id}.jsonl").read_bytes()
    assert not exported.endswith(b"\n"), "saveChat writes no trailing newline"
    lines = [unmarked(json.loads(line)) for line in exported.split(b"\n")]
    again = "\n".join(json.dumps(x, ensure_ascii=False, separators=(",", ":")) for x in lines)
    assert again.encode() == (FIXTURE / LONG).read_bytes(), "SillyTavern's own bytes"

    world = json.loads((out_dir / "worlds" / "Cael Point.json").read_text())
    assert world["entries"]["1"]["content"] == "No ferry runs when the harbour is iced."
    personas = json.loads((out_dir / "personas.json").read_text())
    assert sorted(personas["personas"].values()) == ["Keeper", "Ren"]

    code, again_out = await tavern(projector, "st", "export", str(out_dir))
    assert code == 1
    assert "not empty" in again_out


async def test_a_known_card_is_already_imported_and_a_backup_brings_each_persona(
    projector: Projector, tmp_path: Path
) -> None:
    card = FIXTURE / "characters" / "default_Mira.png"
    code, out = await tavern(projector, "card", "import", str(card))
    assert code == 0, out
    assert "imported character 'Mira'" in out
    stored = (await projector.bus.js.stream_info("ASSETS")).state.messages
    code, out = await tavern(projector, "card", "import", str(card))
    assert (code, "already imported character 'Mira'" in out) == (0, True)
    assert "(chara_card_v2, sha256" in out, "its real source format"
    assert (await projector.bus.js.stream_info("ASSETS")).state.messages == stored

    backup = tmp_path / "personas.json"
    backup.write_text(
        json.dumps(
            {
                "personas": {"ren.png": "Ren", "k.png": "Keeper"},
                "persona_descriptions": {"ren.png": {"description": "A traveller."}},
                "default_persona": "ren.png",
            }
        )
    )
    code, out = await tavern(projector, "card", "import", str(backup))
    assert code == 0, out
    assert "imported persona 'Ren'" in out
    assert "imported persona 'Keeper'" in out


async def test_a_chats_folder_alone_is_bound_to_the_card_imported_before(
    projector: Projector, tmp_path: Path
) -> None:
    code, out = await tavern(
        projector, "card", "import", str(FIXTURE / "characters" / "default_Mira.png")
    )
    assert code == 0, out
    await projector.caught_up("assets")
    folder = tmp_path / "default_Mira"
    shutil.copytree(FIXTURE / "chats" / "default_Mira", folder)
    code, out = await tavern(projector, "st", "import", str(folder))
    assert code == 0, out
    log = await projector.bus.log(session_of(LONG))
    assert log[0].payload.character_id == "mira-a4bd614b", "found by the chat's character name"
    assert log[0].payload.persona_id is None, "no persona Ren is known"


async def test_a_group_chat_and_its_definition_are_imported_and_continued(
    projector: Projector, tmp_path: Path
) -> None:
    folder = tmp_path / "default-user"
    shutil.copytree(FIXTURE, folder)
    card = json.loads(
        (Path(__file__).parents[2] / "fixtures" / "cards" / "v2_mira.json").read_text()
    )
    card["data"] |= {"name": "Tamsin", "first_mes": "Tamsin squints.", "talkativeness": "0.2"}
    (folder / "characters" / "Tamsin.json").write_text(json.dumps(card))
    definition_path = folder / "groups" / "1764625000000.json"
    definition = json.loads(definition_path.read_text())
    definition |= {"members": ["default_Mira.png", "Tamsin.png"], "activation_strategy": 1}
    definition_path.write_text(json.dumps(definition))
    chat_path = folder / "group chats" / "2026-12-01@22h00m00s.jsonl"
    lines = chat_path.read_text().split("\n")
    tamsin = json.loads(lines[-1]) | {
        "name": "Tamsin",
        "mes": "Tamsin grunts.",
        "swipes": ["Tamsin grunts."],
        "original_avatar": "Tamsin.png",
        "force_avatar": "/thumbnail?type=avatar&file=Tamsin.png",
    }
    # as SillyTavern's group/save writes it: message lines only (the fixture has a header)
    chat_path.write_text("\n".join([*lines[1:], json.dumps(tamsin)]))
    code, out = await tavern(projector, "st", "import", str(folder), "--timezone", "Europe/Berlin")
    assert code == 0, out
    assert "3 lines as session" in out, out

    source = f"group chats/{chat_path.name}"
    session_id = chatimport.session_id_for(
        source, stchat.parse_chat(chat_path.read_bytes(), group=True)
    )
    log = await projector.bus.log(session_id)
    group = log[0].payload.group
    assert group is not None
    assert group.activation == "list"
    assert [m.talkativeness for m in group.members] == [0.5, 0.2]
    said = of_type(log, "assistant/message")
    assert [e.payload.speaker.name for e in said] == ["Mira", "Tamsin"]
    assert [e.actor_id for e in said] == list(group.member_ids())

    await projector.bus.engine()
    await projector.bus.say(session_id, "And what now?")
    log = await projector.bus.turns_ended(session_id, 2)
    replies = [e for e in of_type(log, "assistant/message") if e.turn == 2]
    assert [e.actor_id for e in replies] == list(group.member_ids()), "list: both, in order"
    assert all(e.payload.speaker is not None for e in replies)

    projected = await chat_file(projector, session_id)
    assert (await projector.chat_row(session_id))["chat_key"] == f"group chats/{session_id}"
    original = [json.loads(x) for x in chat_path.read_text().split("\n")]
    assert [unmarked(line) for line in projected[:3]] == original, "no header, lines as found"
    new = projected[-2:]
    assert [line["name"] for line in new] == ["Mira", "Tamsin"]
    assert [line["original_avatar"] for line in new] == ["default_Mira.png", "Tamsin.png"]
    await exported_group_imports_back(projector, tmp_path, session_id, group, projected)


async def exported_group_imports_back(
    projector: Projector,
    tmp_path: Path,
    session_id: str,
    group: GroupBinding,
    projected: list[dict[str, Any]],
) -> None:
    """`tavern st export` writes the group chat and its definition in SillyTavern's layout;
    importing the export gives back the same group and the same chat."""
    out_dir = tmp_path / "exported"
    code, out = await tavern(projector, "st", "export", str(out_dir))
    assert code == 0, out
    chat = (out_dir / "group chats" / f"{session_id}.jsonl").read_bytes()
    assert [json.loads(line) for line in chat.split(b"\n")] == projected
    definition = json.loads((out_dir / "groups" / "1764625000000.json").read_text())
    assert definition["members"] == ["default_Mira.png", "Tamsin.png"]
    assert (definition["activation_strategy"], definition["chats"]) == (1, [session_id])
    assert definition["chat_id"] == session_id
    assert not list((out_dir / "chats").rglob(f"{session_id}.jsonl")), "not a member's chat"

    code, out = await tavern(projector, "st", "import", str(out_dir))
    assert code == 0, out
    source = f"group chats/{session_id}.jsonl"
    again = chatimport.session_id_for(source, stchat.parse_chat(chat, group=True))
    log = await projector.bus.log(again)
    assert log[0].payload.group == group, "the same group"
    lines = await chat_file(projector, again)
    assert [unmarked(x) for x in lines] == [unmarked(x) for x in projected], "the same chat"


async def test_a_folder_imported_as_a_user_is_theirs_and_their_export_holds_only_it(
    projector: Projector, tmp_path: Path
) -> None:
    await imported_folder(projector, tmp_path / "operator")
    await imported_folder(projector, tmp_path / "alice", "--user", "alice")
    await projector.caught_up("chat", "assets", "sessions")
    async with projector.pool.acquire() as conn:
        owners = await conn.fetch(
            "SELECT owner, count(*) AS n FROM projector.characters GROUP BY owner ORDER BY owner"
        )
        sessions = await conn.fetch(
            "SELECT owner, count(*) AS n FROM projector.sessions GROUP BY owner ORDER BY owner"
        )
    assert [(r["owner"], r["n"]) for r in owners] == [("alice", 1), ("local", 1)]
    assert [(r["owner"], r["n"]) for r in sessions] == [("alice", 3), ("local", 3)]

    found = await projector.rpc(
        "character.get", {"character": "Mira", "fields": ["name"]}, headers=signed_user("alice")
    )
    assert found["source"]["owner"] == "alice"
    code, out = await tavern(projector, "st", "export", str(tmp_path / "hers"), "--user", "alice")
    assert code == 0, out
    assert "exported 1 characters, 3 chats, 1 groups, 1 worlds, 2 personas" in out
    hers = tmp_path / "hers"
    assert [p.name for p in (hers / "groups").iterdir()] == [
        f"{file_id('1764625000000', 'alice')}.json"
    ], "her group's definition only, not the operator's of the same id"
    assert len(list((hers / "group chats").iterdir())) == 1
    code, out = await tavern(projector, "st", "export", str(tmp_path / "bobs"), "--user", "bob")
    assert code == 0, out
    assert "exported 0 characters, 0 chats, 0 groups, 0 worlds, 0 personas" in out
