"""A user reviews the human gate of their own scopes through `tavern.rpc.consolidator.*`: rule
drafts, style candidates and pool candidates of a scope the ledger says is theirs are listed and
decided; another user's, an unnamed scope, another signature or any other operation is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tavern_events import subjects
from tests.integration.consolidator.conftest import Tavern, tavern_cli
from tests.integration.consolidator.test_dreaming import WORDS, about_tea
from tests.integration.consolidator.test_expression import LINES, candidate, style_from
from tests.integration.consolidator.test_rules import KEEP_APART, drafts
from tests.support import as_user, eventually
from tests.unit.ledger.builders import session_created

pytestmark = pytest.mark.integration

ALICE = "user:alice"


async def ask(tavern: Tavern, who: str, operation: str, /, **body: Any) -> dict[str, Any]:
    """`operation` asked as user `who`, signed as them unless the body says otherwise."""
    data = json.dumps({"actor": f"user:{who}", **body}).encode()
    msg = await tavern.nc.request(
        subjects.rpc("consolidator", operation), data, timeout=15, headers=as_user(who)
    )
    found: dict[str, Any] = json.loads(msg.data)
    return found


async def alices_session(tavern: Tavern, session_id: str, chat_id: str) -> None:
    tavern.seqs[session_id] = 1
    await tavern.publish(session_created(session_id, chat_id=chat_id, owner="alice"))

    async def claimed() -> bool:
        found = await tavern.db.fetchval(
            "SELECT owner FROM ledger.scope_owner WHERE scope_id = $1", chat_id
        )
        return bool(found == "alice")

    await eventually(claimed, timeout=15)


def refused(reply: dict[str, Any]) -> str:
    return str(reply["error"]["code"])


async def test_a_user_lists_and_decides_the_rule_drafts_of_their_own_scope(tavern: Tavern) -> None:
    await alices_session(tavern, "a1", "chat_a")
    await tavern.say("a1", KEEP_APART)
    await drafts(tavern, 1)

    listed = await ask(tavern, "alice", "rules.list", scope_id="chat_a")
    assert [d["text"] for d in listed["drafts"]] == ["配置和代码分开放"]
    assert refused(await ask(tavern, "bob", "rules.list", scope_id="chat_a")) == "forbidden"
    bobs = await ask(tavern, "bob", "rules.decide", scope_id="chat_a", op="accept", ref="1")
    assert refused(bobs) == "forbidden"
    forged = await ask(
        tavern, "alice", "rules.decide", scope_id="chat_a", op="accept", ref="1", actor="bob"
    )
    assert refused(forged) == "forbidden"
    for op, body in (("status", {"scope_id": "chat_a"}), ("expression.list", {})):
        assert refused(await ask(tavern, "alice", op, **body)) == "forbidden", op

    decided = await ask(tavern, "alice", "rules.decide", scope_id="chat_a", op="accept", ref="1")
    assert "error" not in decided, decided
    after = await ask(tavern, "alice", "rules.list", scope_id="chat_a")
    assert (after["drafts"], [r["text"] for r in after["active"]]) == ([], ["配置和代码分开放"])
    audit = await tavern.db.fetchval(
        "SELECT count(*) FROM consolidator.rule_draft WHERE decided_by = $1", ALICE
    )
    assert audit == 1


async def test_a_user_decides_style_and_pool_candidates_of_their_scope_only(
    tavern: Tavern,
) -> None:
    tavern.model.responder = style_from(2)
    await alices_session(tavern, "a1", "chat_a")
    await tavern.say("a1", *LINES)
    held = await candidate(tavern)
    cid = held["candidate_id"]
    listed = await ask(tavern, "alice", "expression.list", scope_id="chat_a", pending=True)
    assert [c["candidate_id"] for c in listed["candidates"]] == [cid]
    bobs = await ask(tavern, "bob", "expression.decide", candidate_id=cid, decision="approve")
    assert refused(bobs) == "forbidden"
    unknown = await ask(
        tavern, "alice", "expression.decide", candidate_id="nope", decision="reject"
    )
    assert refused(unknown) == "forbidden"
    approved = await ask(tavern, "alice", "expression.decide", candidate_id=cid, decision="approve")
    assert approved["candidate"]["state"] == "promoted"

    tavern.model.responder = about_tea("likes")
    await alices_session(tavern, "a2", "chat_t")
    await tavern.say("a2", *WORDS)
    await tavern.ok_batches("chat_t")
    code, _ = await tavern_cli(tavern, "dream", "--scope", "chat_t", "--apply")
    assert code == 0
    pool = await ask(tavern, "alice", "dream.review", op="list", scope_id="chat_t")
    ids = [c["id"] for c in pool["candidates"]]
    assert ids
    assert refused(await ask(tavern, "bob", "dream.review", op="list", scope_id="chat_t")) == (
        "forbidden"
    )
    assert refused(await ask(tavern, "bob", "dream.review", op="reject", ids=ids)) == "forbidden"
    decided = await ask(tavern, "alice", "dream.review", op="reject", ids=ids[:1])
    assert decided["decided"] == ids[:1]
    state = await tavern.db.fetchval(
        "SELECT state FROM consolidator.candidate_memory WHERE id = $1", ids[0]
    )
    assert state == "rejected"
