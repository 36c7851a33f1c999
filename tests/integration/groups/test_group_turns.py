"""Group chats on a running loop and projector: who speaks each turn, by strategy (seeded),
explicit choices, membership changes at a turn boundary, auto mode, replay."""

from __future__ import annotations

import itertools
import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tavern_events.envelope import SessionEvent
from tavern_events.group import GroupBinding
from tavern_events.turn import TurnStarted
from tavern_loop.domain.groupchat import chat_lines, picked_next
from tavern_loop.domain.speakers import Line, choose, turn_rng
from tavern_loop.options import ProfileOptions
from tavern_loop.tools.policy import profile_tools
from tavern_projector import operations
from tavern_projector.core import options_of
from tavern_runtime.cards import importer
from tests.integration.loop.checks import RecordingProvider, of_type, recording_router
from tests.integration.profiles.conftest import check_rebuilt, command, ended
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import files
from tests.support import eventually

pytestmark = pytest.mark.integration

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"
CAST = (("Mira", 0.9), ("Cael", 0.4), ("Oren", 0.6), ("Ines", 0.5))
LINES = (
    "Good evening, all of you.",
    "Cael, is the lamp lit?",
    "What do you make of the storm?",
    "Oren, tell me about the cliffs.",
    "Does anyone know the keeper?",
    "Mira and Oren: who rang the bell?",
    "I will wait by the fire.",
    "Is the tide coming in?",
    "Ines, are you there?",
    "Good night.",
)


async def cast(projector: Projector, tmp_path: Path) -> dict[str, str]:
    """Four cards imported (name -> character id), each its own name and talkativeness."""
    card = json.loads((CARDS / "v2_mira.json").read_text())
    ids: dict[str, str] = {}
    for name, talk in CAST:
        data = {**card["data"], "name": name, "talkativeness": str(talk)}
        data["first_mes"] = f"{name} looks up."
        data["alternate_greetings"] = []
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**card, "data": data}))
        published = await importer.import_file(projector.bus.js, path, projector.settings.data_dir)
        ids[name] = published.asset.asset_id
    await projector.caught_up("assets")
    return ids


def group(ids: dict[str, str], members: Sequence[str], **settings: Any) -> dict[str, Any]:
    talk = dict(CAST)
    listed = [{"character_id": ids[n], "talkativeness": talk[n]} for n in members]
    return {"group_id": "g_cael", "name": "Cael Point", "members": listed, **settings}


async def create(projector: Projector, session: str, binding: dict[str, Any], **more: Any) -> None:
    await command(projector.bus, session, "create", group=binding, **more)


def replies(events: Sequence[SessionEvent], turn: int | None = None) -> list[Any]:
    found = of_type(events, "assistant/message")
    return [e for e in found if e.form is None and (turn is None or e.turn == turn)]


def replayed(events: Sequence[SessionEvent], binding: GroupBinding, names: dict[str, str]) -> None:
    """The speakers chosen again from the log alone (the pure choice, the same seed) are the
    ones that spoke, and every reply names its speaker."""
    starts = [e for e in events if isinstance(e, TurnStarted) and e.payload.speakers is not None]
    for start in starts:
        before = [e for e in events if e.seq < start.seq]
        said = [
            Line(None, e.payload.text)
            for e in of_type(events, "user/message")
            if e.turn == start.turn and e.form is None
        ]
        if not said:
            continue
        history = [*chat_lines(before), *said]
        rng = turn_rng(start.session_id, start.turn)
        again = choose(binding, names, history, rng, user_input=True)
        assert again == start.payload.speakers, f"turn {start.turn}"
        assert [e.actor_id for e in replies(events, start.turn)] == list(again)
    for reply in replies(events):
        assert reply.payload.speaker is not None
        assert reply.payload.speaker.character_id == reply.actor_id
        assert reply.payload.content.startswith(f"{reply.payload.speaker.name} here. ")


FOLDERS = ("chats", "group chats", "groups")


async def chat_lines_of(projector: Projector, session: str) -> list[dict[str, Any]]:
    """The group chat's lines, from `group chats/<chat id>.jsonl` as SillyTavern keeps it:
    message lines only (no header), no trailing newline."""
    await projector.caught_up("chat")
    row = await projector.chat_row(session)
    assert row["chat_key"] == f"group chats/{session}"
    path = projector.chats.parent / "group chats" / f"{session}.jsonl"
    assert projector.chat_file(row["chat_key"]) == path
    data = path.read_bytes()
    assert not data.endswith(b"\n"), "SillyTavern's group/save joins lines, nothing after"
    lines = [json.loads(line) for line in data.split(b"\n")]
    assert all("mes" in line for line in lines), "no header line"
    return lines


def definition_of(projector: Projector, group_id: str) -> dict[str, Any]:
    text = (projector.chats.parent / "groups" / f"{group_id}.json").read_text()
    found = json.loads(text)
    assert text == json.dumps(found, indent=4, ensure_ascii=False), "JSON.stringify(g, null, 4)"
    return dict(found)


def user_folder(projector: Projector) -> dict[str, bytes]:
    root = projector.chats.parent
    return {
        f"{folder}/{path}": data
        for folder in FOLDERS
        if (root / folder).exists()
        for path, data in files(root / folder, "*.json*").items()
    }


async def replayed_files(projector: Projector) -> None:
    """Deleting the chat files, group chats and definitions and replaying the logs writes the
    same files again."""
    before = user_folder(projector)
    for folder in FOLDERS:
        shutil.rmtree(projector.chats.parent / folder, ignore_errors=True)
    options = options_of(projector.settings)
    chosen = operations.plan("chat")
    await operations.replay(projector.pool, projector.bus.js, options, chosen, lambda _: None)
    assert user_folder(projector) == before


async def ten_turns(projector: Projector, session: str) -> list[SessionEvent]:
    for index, text in enumerate(LINES):
        await projector.bus.say(session, text)
        await projector.bus.turns_ended(session, index + 2)
    return await projector.bus.turns_ended(session, len(LINES) + 1)


@pytest.mark.parametrize("activation", ["natural", "list", "pooled"])
async def test_three_members_over_ten_turns_speak_as_the_strategy_picks(
    projector: Projector, tmp_path: Path, activation: str
) -> None:
    ids = await cast(projector, tmp_path)
    names = {cid: name for name, cid in ids.items()}
    model = RecordingProvider()
    await projector.bus.engine(router=recording_router(model))
    binding = group(ids, ["Mira", "Cael", "Oren", "Ines"], disabled=[ids["Ines"]])
    binding["activation"] = activation
    await create(projector, "grp", binding)
    events = await ten_turns(projector, "grp")

    greetings = [e for e in of_type(events, "assistant/message") if e.form == "greeting"]
    assert [(e.turn, e.actor_id, e.payload.content) for e in greetings] == [
        (1, ids[name], f"{name} looks up.") for name in ("Mira", "Cael", "Oren", "Ines")
    ], "every member greets, in the group's order, the muted one too (as SillyTavern)"
    assert all(e.payload.speaker.name == names[e.actor_id] for e in greetings)
    spoke = [e.actor_id for e in replies(events)]
    assert ids["Ines"] not in spoke, "a disabled member never speaks, not even when named"
    assert set(spoke) == {ids["Mira"], ids["Cael"], ids["Oren"]}
    replayed(events, GroupBinding.model_validate(binding), names)
    lines = await chat_lines_of(projector, "grp")
    layout(projector, ids, names, binding)
    said = [line for line in lines if not line["is_user"]]
    assert len(said) == len(replies(events)) + 4, "the greetings and every reply"
    assert [line["name"] for line in said[:4]] == ["Mira", "Cael", "Oren", "Ines"]
    for line, reply in zip(said[4:], replies(events), strict=True):
        assert line["name"] == names[reply.actor_id]
        assert line["original_avatar"] == f"{names[reply.actor_id]}.png"
        assert line["force_avatar"] == f"/thumbnail?type=avatar&file={line['original_avatar']}"
    await replayed_files(projector)
    check_rebuilt(events, model.chat())
    if activation == "list":
        assert all(len(replies(events, t)) == 3 for t in range(2, 12))
    if activation == "pooled":
        assert all(len(replies(events, t)) == 1 for t in range(2, 12))
    if activation == "natural":  # named members answer first, in the order named
        assert replies(events, 3)[0].actor_id == ids["Cael"]
        assert [e.actor_id for e in replies(events, 7)][:2] == [ids["Mira"], ids["Oren"]]
    heard(events, model.chat(), names)


def layout(
    projector: Projector, ids: dict[str, str], names: dict[str, str], binding: dict[str, Any]
) -> None:
    """`groups/<group id>.json` as SillyTavern's groups endpoint writes it, listing the chat;
    nothing of the group under a member's chats folder."""
    found = definition_of(projector, "g_cael")
    assert list(found)[:15] == [
        "id", "name", "members", "allow_self_responses", "activation_strategy",
        "generation_mode", "disabled_members", "chat_metadata", "fav", "chat_id", "chats",
        "auto_mode_delay", "generation_mode_join_prefix", "generation_mode_join_suffix",
        "past_metadata",
    ]  # fmt: skip
    strategy = {"natural": 0, "list": 1, "manual": 2, "pooled": 3}[binding["activation"]]
    assert found["id"] == "g_cael"
    assert found["name"] == "Cael Point"
    assert found["members"] == ["Mira.png", "Cael.png", "Oren.png", "Ines.png"]
    assert found["disabled_members"] == ["Ines.png"]
    assert (found["activation_strategy"], found["chat_id"], found["chats"]) == (
        strategy,
        "grp",
        ["grp"],
    )
    assert found["chat_metadata"]["agentTavern"] == {"sessionId": "grp"}
    assert found["auto_mode_delay"] == 5
    talk = found["agentTavern"]["talkativeness"]
    assert talk == {
        f"{names[m['character_id']]}.png": m["talkativeness"] for m in binding["members"]
    }
    assert not list(projector.chats.rglob("*.jsonl")), "not under the first member's folder"


def heard(events: Sequence[SessionEvent], sent: list[list[dict[str, Any]]], names: Any) -> None:
    """A member who answers after another in the same turn hears it as a named line, and is
    told to speak only as itself."""
    asked = dict(zip([r.seq for r in of_type(events, "agent/request")], sent, strict=True))
    checked = 0
    for turn in {e.turn for e in replies(events)}:
        said = replies(events, turn)
        for first, second in itertools.pairwise(said):
            (request,) = [
                r
                for r in of_type(events, "agent/request")
                if r.step == second.step and r.turn == turn
            ]
            messages = asked[request.seq]
            line = f"{names[first.actor_id]}: {first.payload.content}"
            assert messages[-1] == {"role": "user", "content": line}
            name = names[second.actor_id]
            assert f"Write the next reply only as {name};" in messages[0]["content"]
            checked += 1
    assert checked or all(len(replies(events, t)) < 2 for t in {e.turn for e in events})


async def test_manual_waits_for_the_users_choice_and_members_change_at_a_boundary(
    projector: Projector, tmp_path: Path
) -> None:
    ids = await cast(projector, tmp_path)
    await projector.bus.engine()
    await create(projector, "man", group(ids, ["Mira", "Cael"], activation="manual"))
    await projector.bus.say("man", "Cael, are you awake?")
    events = await projector.bus.turns_ended("man", 2)
    assert replies(events, 2) == []
    assert ended(events, 2).payload.reason == "no speaker"

    await command(projector.bus, "man", "speak", name="cael")
    events = await projector.bus.turns_ended("man", 3)
    (reply,) = replies(events, 3)
    assert reply.actor_id == ids["Cael"]
    assert reply.payload.content.startswith('Cael here. You asked: "Cael, are you awake?"')

    await command(projector.bus, "man", "member", action="add", character_id=ids["Oren"])
    await command(projector.bus, "man", "member", action="mute", character_id=ids["Cael"])
    await command(projector.bus, "man", "group", activation="list")
    await command(projector.bus, "man", "speak", name="Cael")
    await command(projector.bus, "man", "speak", name="Zed")
    await projector.bus.say("man", "Who is here now?")
    events = await projector.bus.turns_ended("man", 9)
    assert of_type(events, "group/member-added")[0].turn == 4
    assert of_type(events, "group/member-muted")[0].turn == 5
    assert ended(events, 7).payload.outcome == "rejected"
    assert ended(events, 7).payload.reason == "Cael is muted in this group"
    assert "no member called 'Zed'" in (ended(events, 8).payload.reason or "")
    assert [e.actor_id for e in replies(events, 9)] == [ids["Mira"], ids["Oren"]]


async def test_auto_mode_stops_at_its_bound_and_on_cancel(
    projector: Projector, tmp_path: Path
) -> None:
    ids = await cast(projector, tmp_path)
    await projector.bus.engine()
    members = ["Mira", "Cael", "Oren"]
    bounded = group(ids, members, activation="pooled", auto_mode=True, auto_bound=4)
    bounded["auto_delay_seconds"] = 0
    await create(projector, "auto", bounded)
    await projector.bus.say("auto", "Talk amongst yourselves.")
    events = await projector.bus.turns_ended("auto", 2)
    spoke = [e.actor_id for e in replies(events, 2)]
    assert len(spoke) == 1 + 4, "the chosen member, then four answers to each other"
    assert all(a != b for a, b in itertools.pairwise(spoke)), "no self-responses"
    assert ended(events, 2).payload.outcome == "completed"

    endless = group(ids, members, activation="natural", auto_mode=True, auto_bound=100)
    endless["auto_delay_seconds"] = 0.3
    await create(projector, "auto2", endless)
    await projector.bus.say("auto2", "Talk amongst yourselves.")

    async def answered() -> list[SessionEvent] | None:
        events = await projector.bus.log("auto2")
        return events if len(replies(events, 2)) >= 3 else None

    await eventually(answered, timeout=20)
    await projector.bus.cancel("auto2")
    events = await projector.bus.turns_ended("auto2", 2)
    assert ended(events, 2).payload.outcome == "cancelled"
    assert 3 <= len(replies(events, 2)) < 20


async def test_a_members_tools_read_its_own_card(projector: Projector, tmp_path: Path) -> None:
    ids = await cast(projector, tmp_path)
    await projector.bus.engine(tools=profile_tools(ProfileOptions()))
    await create(projector, "tools", group(ids, ["Mira", "Cael"], activation="manual"))
    await projector.bus.say("tools", 'call tavern_character_get with {"fields": ["name"]}')
    await command(projector.bus, "tools", "speak", name="Cael")
    events = await projector.bus.turns_ended("tools", 3)
    (call,) = of_type(events, "tool/call")
    (result,) = of_type(events, "tool/result")
    assert call.actor_id == result.actor_id == ids["Cael"]
    assert '"name": "Cael"' in result.payload.content
    assert [e.actor_id for e in replies(events, 3)] == [ids["Cael"], ids["Cael"]]

    await command(projector.bus, "tools", "member", action="mute", character_id=ids["Mira"])
    await projector.bus.say("tools", "call tavern_scene_get with {}")
    await command(projector.bus, "tools", "speak", name="Cael")
    events = await projector.bus.turns_ended("tools", 6)
    scene = json.loads(of_type(events, "tool/result")[-1].payload.content)
    assert scene["group"] == {
        "name": "Cael Point",
        "activation": "manual",
        "members": [
            {"characterId": ids["Mira"], "name": "Mira", "muted": True},
            {"characterId": ids["Cael"], "name": "Cael", "muted": False},
        ],
        "speaking": "Cael",
        "lastSpeaker": "Cael",
    }


async def test_the_model_chooses_the_next_speaker_where_the_group_lets_it(
    projector: Projector, tmp_path: Path
) -> None:
    ids = await cast(projector, tmp_path)
    await projector.bus.engine(tools=profile_tools(ProfileOptions()))
    members = ["Mira", "Cael", "Oren"]
    asked = 'call tavern_speaker_choose with {"name": "Oren", "reason": "the cliffs"}'
    await create(projector, "pick", group(ids, members, activation="manual", model_chooses=True))
    await projector.bus.say("pick", asked)
    await command(projector.bus, "pick", "speak", name="Mira")
    events = await projector.bus.turns_ended("pick", 3)
    (start,) = [e for e in of_type(events, "turn/start") if e.turn == 3]
    assert start.payload.speakers == (ids["Mira"],), "the strategy chose Mira alone"
    (result,) = of_type(events, "tool/result")
    assert (result.actor_id, result.payload.ok) == (ids["Mira"], True)
    assert json.loads(result.payload.content) == {
        "next": {"characterId": ids["Oren"], "name": "Oren"}
    }
    spoke = [e.actor_id for e in replies(events, 3)]
    assert spoke == [ids["Mira"], ids["Mira"], ids["Oren"]], "Mira's call, her reply, Oren"
    mira = [e for e in events if e.turn == 3 and e.actor_id == ids["Mira"]]
    assert picked_next(mira) == ids["Oren"], "the log alone says who was chosen (replay)"
    assert ended(events, 3).payload.outcome == "completed"

    await create(projector, "nopick", group(ids, members, activation="manual"))
    await projector.bus.say("nopick", asked)
    await command(projector.bus, "nopick", "speak", name="Mira")
    events = await projector.bus.turns_ended("nopick", 3)
    (result,) = of_type(events, "tool/result")
    assert result.payload.ok is False
    assert "does not let the model choose" in result.payload.content
    assert {e.actor_id for e in replies(events, 3)} == {ids["Mira"]}, "nobody else speaks"


async def test_the_st_profile_sends_sillytaverns_group_prompt(
    projector: Projector, tmp_path: Path
) -> None:
    ids = await cast(projector, tmp_path)
    names = {cid: name for name, cid in ids.items()}
    model = RecordingProvider()
    await projector.bus.engine(router=recording_router(model))
    binding = group(ids, ["Mira", "Cael", "Oren"], activation="list")
    await create(projector, "stg", binding, architecture="st")
    for index, text in enumerate(LINES[:2]):
        await projector.bus.say("stg", text)
        await projector.bus.turns_ended("stg", index + 2)
    events = await projector.bus.turns_ended("stg", 3)
    sent = model.chat()
    asked = [e for e in of_type(events, "agent/request")]
    assert len(sent) == len(asked) == 6, "three members, two turns"
    for request, messages in zip(asked, sent, strict=True):
        speaker = names[request.actor_id]
        system = messages[0]["content"]
        assert system.endswith("[Start a new group chat. Group members: Mira, Cael, Oren]")
        assert "Group chat with" not in system, "SillyTavern's prompt, not agent-tavern's note"
        assert messages[-1] == {
            "role": "system",
            "content": f"[Write the next reply only as {speaker}.]",
        }
        for message in messages[1:-1]:
            if message["role"] == "assistant":
                assert message["content"].split(": ", 1)[0] in ("Mira", "Cael", "Oren")
    last = sent[-1]
    said = [m["content"] for m in last if m["role"] == "assistant"]
    assert said[0] == "Mira: Mira looks up.", "the greeting, named"
    earlier = replies(events)[-3:-1]
    assert said[-2:] == [f"{names[e.actor_id]}: {e.payload.content}" for e in earlier]
    for reply in replies(events):  # the offline model answers in the member's name
        assert reply.payload.content.startswith(f"{names[reply.actor_id]} here. You ")
    check_rebuilt(events, sent)
