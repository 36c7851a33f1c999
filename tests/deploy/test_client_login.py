"""Issue 48, points 1 and 2, tried as an attacker on a real nats-server with the shipped config
(deploy/nats/single.conf + accounts.conf) and with the embedded one `tavern up` generates:

1. no login but the operator may create or update a consumer in any form that names it in the
   subject, and the `client` login may create none at all, so nobody can rewrite the ledger's
   `ledger-ingest` durable (its filters, `max_ack_pending`, its description) and stop memory
   ingestion for everyone;
2. the `client` login reads no session log: no subscription on `tavern.session.>`, no ordered
   consumer, no direct get, no message get, no stream info on SESSIONS.

What the client is for still works: it sends inputs and asks the projector's read RPCs."""

from __future__ import annotations

import asyncio
import io
import json
from datetime import UTC, datetime
from functools import partial
from typing import Any

import nats
import pytest
from nats.aio.msg import Msg

from tavern_cli import catalog
from tavern_cli.access import CLIENT_RPCS
from tavern_cli.conversation import Conversation, Renderer
from tavern_events import subjects
from tavern_events.ids import new_id
from tavern_events.message import UserMessage, UserMessagePayload
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.sessionlog import SessionLogWriter
from tests.deploy import natsconf
from tests.deploy import test_nats_permissions as permissions
from tests.deploy.test_nats_permissions import Secured, User
from tests.support import eventually

server = permissions.server  # both configs: deploy/nats/single.conf and the embedded one
secured = permissions.secured

pytestmark = pytest.mark.integration

INGEST = "ledger-ingest"
SECRET = "bank PIN hint is blue-heron"
NOT_ANSWERED_S = 1.0
NON_OPERATORS = tuple(u for u in natsconf.USERS if u != "operator")


def _hijack(name: str, *, durable: bool = False, action: str = "") -> bytes:
    """A consumer config that, applied to `ledger-ingest`, would hand it nothing ever again."""
    config: dict[str, Any] = {
        "name": name,
        "description": "hijacked",
        "filter_subject": "tavern.session.nobody.x",
        "ack_policy": "explicit",
        "deliver_policy": "all",
        "max_ack_pending": 1,
    }
    if durable:
        config["durable_name"] = name
    body: dict[str, Any] = {"stream_name": "SESSIONS", "config": config}
    if action:
        body["action"] = action
    return json.dumps(body).encode()


def _create_forms(name: str) -> list[tuple[str, bytes]]:
    """Every consumer-create request of nats-server 2.15 (jetstream_api.go: the bare legacy
    ephemeral create takes the name from the body, the others from the subject), as create
    and as update."""
    bare = "$JS.API.CONSUMER.CREATE.SESSIONS"
    named = f"$JS.API.CONSUMER.CREATE.SESSIONS.{name}"
    filtered = f"$JS.API.CONSUMER.CREATE.SESSIONS.{name}.tavern.session.nobody.x"
    durable = f"$JS.API.CONSUMER.DURABLE.CREATE.SESSIONS.{name}"
    return [
        (bare, _hijack(name)),
        (bare, _hijack(name, action="update")),
        (named, _hijack(name)),
        (named, _hijack(name, durable=True, action="update")),
        (filtered, _hijack(name)),
        (durable, _hijack(name, durable=True)),
    ]


async def _unanswered(user: User, subject: str, body: bytes) -> None:
    """The server drops the request (no reply) and tells the sender it was a violation."""
    with pytest.raises(nats.errors.TimeoutError):
        await user.nc.request(subject, body, timeout=NOT_ANSWERED_S)
    assert await user.refused(subject), (user.name, subject, user.errors)


async def _all_unanswered(user: User, requests: list[tuple[str, bytes]]) -> None:
    """`_unanswered` for each request, all at once (each waits out the same deadline)."""
    await asyncio.gather(*(_unanswered(user, subject, body) for subject, body in requests))


async def _ingest_config(secured: Secured) -> dict[str, Any]:
    info = await secured.operator.consumer_info("SESSIONS", INGEST)
    config: dict[str, Any] = info.config.as_dict()
    return config


# --- 1. nobody but the operator rewrites a durable ----------------------------------------------


def test_the_ledgers_durable_is_one_the_catalog_provisions() -> None:
    assert INGEST in {c.name for c in catalog.all_consumers() if c.stream == "SESSIONS"}


async def test_client_cannot_create_or_update_the_ledgers_durable_in_any_form(
    secured: Secured,
) -> None:
    before = await _ingest_config(secured)
    client = secured.users["client"]
    await _all_unanswered(client, _create_forms(INGEST))
    assert await _ingest_config(secured) == before


async def test_client_cannot_create_any_consumer_on_any_stream(secured: Secured) -> None:
    client = secured.users["client"]
    await _all_unanswered(
        client,
        [
            (subject.replace(".SESSIONS", f".{stream}"), body)
            for stream in ("SESSIONS", "INPUTS", "LEDGER", "ASSETS", "DLQ")
            for subject, body in _create_forms("rogue")
        ],
    )
    for stream in ("SESSIONS", "INPUTS"):
        names = [c.name for c in await secured.operator.consumers_info(stream)]
        assert "rogue" not in names


@pytest.mark.parametrize("user", ["loop", "ledger", "consolidator", "client"])
async def test_logins_without_unnamed_consumers_cannot_rewrite_a_durable_by_the_bare_create(
    secured: Secured, user: str
) -> None:
    """The bare create takes the consumer's name from its body: only the projector and the
    gateway, which read with unnamed consumers, may publish it (the residual risk)."""
    before = await _ingest_config(secured)
    await _all_unanswered(secured.users[user], _create_forms(INGEST)[:2])
    assert await _ingest_config(secured) == before


@pytest.mark.parametrize("user", NON_OPERATORS)
async def test_no_login_but_the_operator_creates_or_updates_a_consumer_by_name(
    secured: Secured, user: str
) -> None:
    """Every create form that names the consumer in its subject is the operator's alone, for
    every durable of the catalog and any new name."""
    before = await _ingest_config(secured)
    attacker = secured.users[user]
    await _all_unanswered(attacker, _create_forms(INGEST)[2:] + _create_forms("rogue")[2:])
    assert await _ingest_config(secured) == before
    names = [c.name for c in await secured.operator.consumers_info("SESSIONS")]
    assert "rogue" not in names


@pytest.mark.parametrize("user", NON_OPERATORS)
async def test_no_login_but_the_operator_deletes_pauses_or_resets_a_consumer(
    secured: Secured, user: str
) -> None:
    attacker = secured.users[user]
    verbs = ("DELETE", "PAUSE", "RESET", "UNPIN", "LEADER.STEPDOWN")
    await _all_unanswered(
        attacker, [(f"$JS.API.CONSUMER.{verb}.SESSIONS.{INGEST}", b"{}") for verb in verbs]
    )
    await secured.operator.consumer_info("SESSIONS", INGEST)


# --- 2. the client reads no session log ---------------------------------------------------------


def _said(session_id: str, text: str) -> UserMessage:
    return UserMessage(
        id=new_id(),
        session_id=session_id,
        ts=datetime.now(UTC),
        turn=1,
        source="user",
        payload=UserMessagePayload(text=text),
    )


async def _bobs_session(secured: Secured) -> str:
    """Another user's session whose log holds a secret."""
    session_id = f"bob-{new_id()[-8:]}"
    writer = SessionLogWriter(secured.users["loop"].nc)
    await writer.append(session_id, [_said(session_id, SECRET)], expected_last=0)
    return session_id


def _subscription_refused(user: User, subject: str) -> bool:
    wanted = f'permissions violation for subscription to "{subject}"'.lower()
    return any(wanted in e.lower() for e in user.errors)


async def test_client_cannot_subscribe_to_session_logs(secured: Secured) -> None:
    client = secured.users["client"]
    heard: list[bytes] = []

    async def got(msg: Msg) -> None:
        heard.append(msg.data)

    for subject in ("tavern.session.>", "tavern.>", "tavern.session.*.user.message"):
        await client.nc.subscribe(subject, cb=got)
    await client.nc.flush()
    await _bobs_session(secured)
    for subject in ("tavern.session.>", "tavern.>", "tavern.session.*.user.message"):
        assert await eventually(partial(_subscription_refused, client, subject), timeout=3)
    await asyncio.sleep(0.3)
    assert [d for d in heard if SECRET.encode() in d] == []


async def test_client_cannot_follow_a_session_with_an_ordered_consumer(secured: Secured) -> None:
    session_id = await _bobs_session(secured)
    client = secured.users["client"]
    heard: list[bytes] = []

    async def got(msg: Msg) -> None:
        heard.append(msg.data)

    js = client.nc.jetstream(timeout=NOT_ANSWERED_S)
    with pytest.raises(nats.errors.TimeoutError):
        await js.subscribe(
            subjects.session_filter(session_id), stream="SESSIONS", ordered_consumer=True, cb=got
        )
    assert await client.refused("$JS.API.CONSUMER.CREATE.SESSIONS")
    assert heard == []


async def test_client_cannot_get_a_session_event_directly_or_by_sequence(
    secured: Secured,
) -> None:
    session_id = await _bobs_session(secured)
    client = secured.users["client"]
    last = json.dumps({"last_by_subj": f"tavern.session.{session_id}.user.message"}).encode()
    by_subject = f"$JS.API.DIRECT.GET.SESSIONS.tavern.session.{session_id}.user.message"
    reads = [
        ("$JS.API.DIRECT.GET.SESSIONS", last),
        ("$JS.API.DIRECT.GET.SESSIONS", json.dumps({"seq": 1}).encode()),
        (by_subject, b""),
        ("$JS.API.STREAM.MSG.GET.SESSIONS", json.dumps({"seq": 1}).encode()),
        ("$JS.API.STREAM.INFO.SESSIONS", json.dumps({"subjects_filter": ">"}).encode()),
        ("$JS.API.CONSUMER.LIST.SESSIONS", b"{}"),
        ("$JS.API.CONSUMER.INFO.SESSIONS.projector-chat", b""),
    ]
    await _all_unanswered(client, reads)
    operator_sees = await secured.operator.get_last_msg(
        "SESSIONS", f"tavern.session.{session_id}.user.message", direct=True
    )
    assert SECRET.encode() in (operator_sees.data or b"")


# --- what the client is for ---------------------------------------------------------------------


async def test_client_still_sends_inputs_and_asks_the_projectors_read_rpcs(
    secured: Secured,
) -> None:
    """No projector answers here: an allowed request ends with no responders, a refused one
    would time out with a violation."""
    client = secured.users["client"]
    ack = await client.js.publish(subjects.session_input("s1", "message"), b"{}")
    assert ack.stream == "INPUTS"
    for name in CLIENT_RPCS:
        with pytest.raises(nats.errors.NoRespondersError):
            await client.nc.request(f"tavern.rpc.{name}", b"{}", timeout=NOT_ANSWERED_S)
    await client.js.account_info()
    await asyncio.sleep(0.2)
    assert client.errors == []


async def test_tavern_chat_as_the_client_login_says_it_may_not_read_session_logs(
    secured: Secured,
) -> None:
    session_id = await _bobs_session(secured)
    chat = Conversation(secured.users["client"].nc, session_id, Renderer(io.StringIO()))
    with pytest.raises(ConfigurationError, match="may not read session logs"):
        await chat.exists()
    with pytest.raises(ConfigurationError, match="may not read session logs"):
        await chat.open()
    as_operator = Conversation(secured.users["operator"].nc, session_id, Renderer(io.StringIO()))
    assert await as_operator.exists()
