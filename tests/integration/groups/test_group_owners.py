"""Two users' group chats with the same group id: each owner's chats get a definition of their
own in the projected `groups/`, and neither lists the other's chats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_projector.domain.groupdef import file_id
from tavern_runtime import principals
from tavern_runtime.cards import importer
from tests.integration.groups.test_group_turns import CARDS, definition_of
from tests.integration.projector.conftest import Projector
from tests.support import auth, eventually

pytestmark = pytest.mark.integration


async def _cards(projector: Projector, tmp_path: Path, owner: str) -> list[str]:
    """Two cards of `owner`'s own (a user binds only their own characters)."""
    card = json.loads((CARDS / "v2_mira.json").read_text())
    ids = []
    for name in ("Mira", "Cael"):
        data = {**card["data"], "name": name, "first_mes": f"{name} nods."}
        path = tmp_path / f"{owner}-{name}.json"
        path.write_text(json.dumps({**card, "data": data}))
        data_dir = projector.settings.data_dir
        published = await importer.import_file(projector.bus.js, path, data_dir, owner=owner)
        ids.append(published.asset.asset_id)
    return ids


async def _group_chat(projector: Projector, session: str, owner: str, members: list[str]) -> None:
    group = {
        "group_id": "g_same",
        "name": f"{owner}'s table",
        "members": [{"character_id": m} for m in members],
    }
    headers = auth(principals.user(owner) if owner != "local" else None)
    await projector.bus.command(session, "create", headers=headers, args={"group": group})


async def test_two_users_groups_with_one_id_get_a_definition_each(
    projector: Projector, tmp_path: Path
) -> None:
    cards = {owner: await _cards(projector, tmp_path, owner) for owner in ("alice", "bob")}
    local = await _cards(projector, tmp_path, "local")
    await projector.caught_up("assets")
    await projector.bus.engine()
    await _group_chat(projector, "alice-1", "alice", cards["alice"])
    await _group_chat(projector, "bob-1", "bob", cards["bob"])
    await _group_chat(projector, "mine-1", "local", local)
    for session in ("alice-1", "bob-1", "mine-1"):
        await projector.bus.turns_ended(session, 1)
    await projector.caught_up("chat")
    groups = projector.chats.parent / "groups"

    async def written() -> bool:
        return len(list(groups.glob("*.json"))) == 3

    await eventually(written, timeout=15)
    ids = {owner: file_id("g_same", owner) for owner in ("alice", "bob", "local")}
    assert ids["local"] == "g_same", "the install's own owner keeps SillyTavern's id"
    assert len(set(ids.values())) == 3
    assert sorted(p.stem for p in groups.glob("*.json")) == sorted(ids.values())
    for owner, session in (("alice", "alice-1"), ("bob", "bob-1"), ("local", "mine-1")):
        found = definition_of(projector, ids[owner])
        assert (found["id"], found["chats"], found["chat_id"]) == (ids[owner], [session], session)
        assert found["name"] == f"{owner}'s table"
    chats = sorted(p.stem for p in (projector.chats.parent / "group chats").glob("*.jsonl"))
    assert chats == ["alice-1", "bob-1", "mine-1"]
