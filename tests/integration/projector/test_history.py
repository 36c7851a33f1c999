"""`tavern_history_search`: one chat and its allowed parents, CJK-aware, bounded, traceable."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from tavern_events.ids import new_id
from tavern_events.session import SessionCreated, SessionCreatedPayload
from tests.integration.projector.conftest import Projector
from tests.integration.projector.scenes import scripted_turn

pytestmark = pytest.mark.integration


async def search(projector: Projector, session_id: str, query: str, **more: Any) -> dict[str, Any]:
    return await projector.rpc("history.search", {"session_id": session_id, "query": query, **more})


def seqs(found: dict[str, Any]) -> list[tuple[str, int]]:
    return [(hit["session_id"], hit["seq"]) for hit in found["hits"]]


async def test_history_search_reads_the_chat_then_its_parents_up_to_the_fork(
    projector: Projector,
) -> None:
    await projector.create_session("s1")
    first = await scripted_turn(
        projector, "s1", 1, "The lighthouse has 214 steps.", "I counted them."
    )
    second = await scripted_turn(projector, "s1", 2, "灯塔的门为什么开着？", "风把它吹开了。")  # noqa: RUF001
    await scripted_turn(projector, "s1", 3, "Light the lantern.", "The lantern is lit.")
    fork = SessionCreatedPayload(
        architecture="agent-tavern",
        context_mode="dsh-native",
        chat_id="s2",
        parent_session_id="s1",
        forked_at_seq=first[-1].seq,
    )
    await projector.append(
        "s2", SessionCreated(id=new_id(), session_id="s2", ts=datetime.now(UTC), payload=fork)
    )
    own = await scripted_turn(projector, "s2", 1, "Where is the lantern?", "The lantern is brass.")
    await projector.caught_up()

    said, replied = first[2], first[3]
    found = await search(projector, "s2", "lantern")
    assert seqs(found) == [("s2", own[3].seq), ("s2", own[2].seq)], (
        "the parent's later turn is not s2's"
    )
    found = await search(projector, "s2", "LIGHTHOUSE steps")
    assert seqs(found) == [("s1", said.seq)]
    hit = found["hits"][0]
    assert (hit["message_id"], hit["chat"], hit["isUser"], hit["name"]) == (
        said.id,
        "Assistant/s1",
        True,
        "User",
    )
    assert hit["source"] == {"kind": "chat-history", "id": f"s1#{said.seq}"}
    assert seqs(await search(projector, "s2", "lighthouse", parents=False)) == []
    assert seqs(await search(projector, "s1", "counted")) == [("s1", replied.seq)]

    assert seqs(await search(projector, "s1", "灯塔")) == [("s1", second[2].seq)]
    assert seqs(await search(projector, "s1", "开着")) == [("s1", second[2].seq)]
    assert seqs(await search(projector, "s1", "门开")) == [], "not adjacent in the message"
    assert seqs(await search(projector, "s1", "吹")) == [("s1", second[3].seq)]

    capped = await search(projector, "s1", "the", limit=1)
    assert len(capped["hits"]) == 1
    assert capped["truncated"] is True
    assert capped["sourceCount"] == 3
    refused = await search(projector, "s1", "？？")  # noqa: RUF001
    assert refused["error"]["message"] == "query: history query requires at least one word"
