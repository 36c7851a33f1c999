"""What an import refuses is refused before anything is published, and a card of another user
is answered as one that does not exist."""

from __future__ import annotations

import json
from pathlib import Path

import nats
from fastapi import FastAPI

from tavern_events import streams
from tests.integration.gateway.conftest import PASSWORD, Browser

CARDS = Path(__file__).resolve().parents[2] / "fixtures" / "cards"


async def _assets_in_stream(nats_url: str) -> int:
    nc = await nats.connect(nats_url)
    try:
        info = await nc.jetstream().stream_info(streams.ASSETS.name)
        return int(info.state.messages)
    finally:
        await nc.close()


async def _upload(browser: Browser, name: str, data: bytes) -> object:
    headers = {"X-CSRF-Token": browser.http.cookies.get("tavern_csrf") or ""}
    files = {"file": (name, data, "application/json")}
    return await browser.http.post("/api/assets", files=files, headers=headers)


async def test_a_card_with_nul_in_its_name_is_refused_and_nothing_is_published(
    gateway: FastAPI, owner: Browser, provisioned: str
) -> None:
    card = json.loads((CARDS / "v2_mira.json").read_text())
    card["data"]["name"] = "Mi\u0000ra"
    before = await _assets_in_stream(provisioned)
    refused = await _upload(owner, "mira.json", json.dumps(card).encode())
    assert refused.status_code == 400, refused.text  # type: ignore[attr-defined]
    error = refused.json()["error"]  # type: ignore[attr-defined]
    assert (error["code"], error["reason"]) == ("invalid", "invalid_card")
    assert "U+0000" in error["message"]
    assert await _assets_in_stream(provisioned) == before
    assert (await owner.http.get("/api/assets")).json()["assets"] == []


async def test_a_chat_with_another_users_card_answers_as_a_card_that_does_not_exist(
    gateway: FastAPI, owner: Browser
) -> None:
    imported = await _upload(owner, "mira.json", (CARDS / "v2_mira.json").read_bytes())
    assert imported.status_code == 200, imported.text  # type: ignore[attr-defined]
    olgas = imported.json()["asset_id"]  # type: ignore[attr-defined]
    token = str((await owner.post("/api/invites")).json()["url"]).rsplit("/", 1)[1]
    uma = await Browser(gateway).open()
    joined = await uma.post(f"/api/invites/{token}/accept", {"name": "uma", "password": PASSWORD})
    assert joined.status_code == 200, joined.text
    theirs = await uma.post("/api/sessions", {"character_id": olgas})
    missing = await uma.post("/api/sessions", {"character_id": "c-" + "0" * 20})
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["error"]["message"].replace(olgas, "ID") == missing.json()["error"][
        "message"
    ].replace("c-" + "0" * 20, "ID")
