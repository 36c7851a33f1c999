"""deploy/nats/accounts.conf, and the config the embedded server of `tavern up` generates, on a
real nats-server: each service's user can do its job (the services themselves start and turn
ready under it) and cannot write what it does not own. Every test runs against both."""

from __future__ import annotations

import asyncio
import importlib
import io
import json
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import httpx
import nats
import pytest
import structlog
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy

from tavern_cli import catalog, demo, secure
from tavern_events import subjects
from tavern_events.ids import new_id
from tavern_events.message import UserMessage, UserMessagePayload
from tavern_events.step import StepStarted
from tavern_loop.dispatch import dispatch_consumer
from tavern_runtime.bus import login_options
from tavern_runtime.credentials import Credentials
from tavern_runtime.embedded import free_ports
from tavern_runtime.provision import LEASES, ConsumerSpec, provision
from tavern_runtime.service import serve
from tavern_runtime.sessionlog import SessionLogReader, SessionLogWriter
from tavern_runtime.settings import TavernSettings
from tests.deploy import natsconf
from tests.support import eventually, flushed

pytestmark = pytest.mark.integration

REFUSED_WITHIN_S = 1.0


@dataclass
class User:
    """A connection logged in as one user, with the asynchronous errors the server sent it."""

    name: str
    nc: Client
    errors: list[str] = field(default_factory=list)

    @property
    def js(self) -> JetStreamContext:
        return self.nc.jetstream(timeout=3)

    async def refused(self, subject: str) -> bool:
        return await eventually(
            lambda: any(
                f'permissions violation for publish to "{subject}"'.lower() in e.lower()
                for e in self.errors
            ),
            timeout=3,
        )


@dataclass(frozen=True)
class Server:
    """A running nats-server and the password of each of its users."""

    kind: str
    url: str
    password: Callable[[str], str]


@dataclass
class Secured:
    server: Server
    users: dict[str, User]

    @property
    def operator(self) -> JetStreamContext:
        return self.users["operator"].js


def _consumers() -> list[ConsumerSpec]:
    """The durable consumers `tavern init` provisions; the loop's dispatch consumer among them."""
    consumers = list(catalog.all_consumers())
    assert dispatch_consumer().name in {c.name for c in consumers}
    return consumers


@pytest.fixture(params=["accounts.conf", "embedded"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Server]:
    """deploy/nats/single.conf + accounts.conf, or the embedded server `tavern up` starts."""
    if request.param == "accounts.conf":
        node = natsconf.single_node(tmp_path / "nats")
        node.start(os.environ)
        try:
            node.wait_listening()
            yield Server("accounts.conf", node.url, natsconf.password)
        finally:
            node.stop()
        return
    credentials = Credentials.generate()
    embedded = secure.embedded_nats(tmp_path / "embedded", credentials)
    embedded.start()
    try:
        yield Server("embedded", embedded.url, credentials.nats_password)
    finally:
        embedded.stop()


async def _login(server: Server, user: str, password: str | None = None) -> User:
    """Logged in as `user`, with that user's own inbox prefix (as the services do)."""
    errors: list[str] = []

    async def on_error(exc: Exception) -> None:
        errors.append(str(exc))

    secret = server.password(user) if password is None else password
    options = login_options(user, secret)
    nc = await nats.connect(server.url, error_cb=on_error, **options)
    return User(user, nc, errors)


@pytest.fixture
async def secured(server: Server) -> AsyncIterator[Secured]:
    users = {name: await _login(server, name) for name in natsconf.USERS}
    env = Secured(server, users)
    report = await provision(env.operator, consumers=_consumers())
    assert report.ok, report.lines()
    try:
        yield env
    finally:
        for user in users.values():
            await user.nc.close()


async def _count(js: JetStreamContext, stream: str) -> int:
    return (await js.stream_info(stream)).state.messages


async def _publish_refused(user: User, operator: JetStreamContext, subject: str) -> None:
    """A JetStream publish that the server drops: no ack, a permissions violation, no message."""
    stream = {"session": "SESSIONS", "ledger": "LEDGER", "input": "INPUTS", "dlq": "DLQ"}[
        subject.split(".")[1]
    ]
    before = await _count(operator, stream)
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await user.js.publish(subject, b"{}", timeout=REFUSED_WITHIN_S)
    assert await user.refused(subject)
    assert await _count(operator, stream) == before


def _said(session_id: str, text: str) -> UserMessage:
    payload = UserMessagePayload(text=text)
    now = datetime.now(UTC)
    return UserMessage(
        id=new_id(), session_id=session_id, ts=now, turn=1, source="user", payload=payload
    )


def _step(session_id: str) -> StepStarted:
    return StepStarted(id=new_id(), session_id=session_id, ts=datetime.now(UTC), turn=1, step=1)


# --- what each user may do ----------------------------------------------------------------------


async def test_loop_user_appends_session_events_and_consumes_inputs(secured: Secured) -> None:
    loop, client = secured.users["loop"], secured.users["client"]
    await client.js.publish(subjects.session_input("s1", "message"), b"{}")
    inputs = await loop.js.pull_subscribe_bind(dispatch_consumer().name, stream="INPUTS")
    [delivered] = await inputs.fetch(1, timeout=3)
    await delivered.ack()
    writer = SessionLogWriter(loop.nc)
    await writer.append("s1", [_said("s1", "hi")], expected_last=0)
    await writer.append("s1", [_step("s1"), _said("s1", "batch")], expected_last=1)  # atomic batch
    assert [e.seq for e in await SessionLogReader(loop.js).events("s1")] == [1, 2, 3]
    await loop.js.get_msg("INPUTS", seq=1, subject="tavern.input.s1.>", next=True, direct=True)
    assert loop.errors == []


async def test_loop_user_may_ask_every_service_the_loop_calls(secured: Secured) -> None:
    """Recall and the memory tools (ledger), assets and history (projector), approvals at a
    turn's first step (consolidator): a refused request would wait out its deadline on every
    turn. No service answers here, so each request ends with no responders, never a refusal."""
    loop = secured.users["loop"]
    called = [
        subjects.rpc("ledger", "recall"),
        subjects.rpc("ledger", "query"),
        subjects.rpc("projector", "character.get"),
        subjects.rpc("projector", "history.search"),
        subjects.rpc("consolidator", "approvals.next"),
    ]
    for subject in called:
        with pytest.raises(nats.errors.NoRespondersError):
            await loop.nc.request(subject, b"{}", timeout=REFUSED_WITHIN_S)
    await asyncio.sleep(0.2)  # a refusal arrives as an asynchronous error
    assert loop.errors == []


async def test_loop_user_holds_session_leases(secured: Secured) -> None:
    kv = await secured.users["loop"].js.key_value(LEASES.name)
    revision = await kv.create("session.s1", b"replica-a")
    revision = await kv.update("session.s1", b"replica-a", last=revision)
    assert (await kv.get("session.s1")).value == b"replica-a"
    await kv.delete("session.s1", last=revision)
    assert secured.users["loop"].errors == []


async def test_projector_user_reads_every_stream_it_projects(secured: Secured) -> None:
    loop, projector = secured.users["loop"], secured.users["projector"]
    await SessionLogWriter(loop.nc).append("s1", [_said("s1", "hi")], expected_last=0)
    await secured.users["ledger"].js.publish("tavern.ledger.u1.memory.changed", b"{}")
    await secured.users["operator"].js.publish("tavern.asset.card.c1.imported", b"{}")
    replayed = [e async for e in SessionLogReader(projector.js).all_sessions()]
    assert [e.event.id for e in replayed] == [
        e.id for e in await SessionLogReader(loop.js).events("s1")
    ]
    for stream in ("SESSIONS", "LEDGER", "ASSETS"):
        await secured.operator.add_consumer(stream, _durable(f"projector-{stream.lower()}"))
        pull = await projector.js.pull_subscribe_bind(f"projector-{stream.lower()}", stream=stream)
        [msg] = await pull.fetch(1, timeout=3)
        await msg.ack()
    assert projector.errors == []


async def test_ledger_user_commits_facts_and_answers_its_rpc(secured: Secured) -> None:
    ledger, loop = secured.users["ledger"], secured.users["loop"]
    ack = await ledger.js.publish("tavern.ledger.u1.observation.upserted", b"{}")
    assert ack.stream == "LEDGER"

    async def answer(msg: Msg) -> None:
        await msg.respond(json.dumps({"ok": True}).encode())

    await ledger.nc.subscribe(subjects.rpc("ledger", "recall"), queue="ledger-rpc", cb=answer)
    await flushed(ledger.nc)
    reply = await loop.nc.request(subjects.rpc("ledger", "recall"), b"{}", timeout=3)
    assert json.loads(reply.data) == {"ok": True}
    assert ledger.errors == loop.errors == []


async def test_consolidator_user_may_only_propose_observations(secured: Secured) -> None:
    consolidator = secured.users["consolidator"]
    with pytest.raises(nats.errors.NoRespondersError):  # allowed, nobody answers here
        await consolidator.nc.request("tavern.rpc.ledger.observation.propose", b"{}", timeout=1)
    with pytest.raises(nats.errors.TimeoutError):  # dropped by the server
        await consolidator.nc.request(subjects.rpc("ledger", "recall"), b"{}", timeout=1)
    assert await consolidator.refused(subjects.rpc("ledger", "recall"))


async def test_each_service_dead_letters_only_to_its_own_subject(secured: Secured) -> None:
    for service in ("loop", "ledger", "projector", "consolidator"):
        user = secured.users[service]
        ack = await user.js.publish(subjects.dead_letter(service), b"{}", stream="DLQ")
        assert ack.stream == "DLQ"
        other = "ledger" if service != "ledger" else "loop"
        await _publish_refused(user, secured.operator, subjects.dead_letter(other))


def _concrete(filter_subject: str) -> str:
    """A subject that `filter_subject` matches."""
    return ".".join("x" if t == "*" else t for t in filter_subject.split(".")).replace(">", "x.y")


@pytest.mark.parametrize(
    ("service", "consumer"),
    [(e.name, c) for e in catalog.SERVICES for c in e.consumers()],
    ids=lambda v: v if isinstance(v, str) else v.name,
)
async def test_each_service_pulls_and_acks_its_own_durable_consumers(
    secured: Secured, service: str, consumer: ConsumerSpec
) -> None:
    user = secured.users[service]
    await secured.operator.publish(_concrete(consumer.filter_subjects[0]), b"{}")
    await user.js.consumer_info(consumer.stream, consumer.name)
    pull = await user.js.pull_subscribe_bind(consumer.name, stream=consumer.stream)
    [msg] = await pull.fetch(1, timeout=3)
    await msg.ack_sync()
    assert user.errors == []


# --- what each user may not do ------------------------------------------------------------------


async def test_projector_user_cannot_publish_a_session_event(secured: Secured) -> None:
    await _publish_refused(
        secured.users["projector"], secured.operator, subjects.session_event("s1", "turn/start")
    )


async def test_loop_user_cannot_publish_a_ledger_fact(secured: Secured) -> None:
    await _publish_refused(
        secured.users["loop"], secured.operator, "tavern.ledger.u1.memory.changed"
    )


async def test_client_user_sends_inputs_but_cannot_write_a_session_log(secured: Secured) -> None:
    client = secured.users["client"]
    ack = await client.js.publish(subjects.session_input("s1", "message"), b"{}")
    assert ack.stream == "INPUTS"
    await _publish_refused(client, secured.operator, subjects.session_event("s1", "turn/start"))


async def test_services_cannot_create_or_delete_durable_consumers(secured: Secured) -> None:
    projector = secured.users["projector"].nc.jetstream(timeout=REFUSED_WITHIN_S)
    with pytest.raises(nats.errors.TimeoutError):
        await projector.add_consumer("SESSIONS", _durable("rogue"))
    with pytest.raises(nats.errors.TimeoutError):
        await projector.delete_consumer("INPUTS", dispatch_consumer().name)
    names = [c.name for c in await secured.operator.consumers_info("SESSIONS")]
    assert "rogue" not in names
    await secured.operator.consumer_info("INPUTS", dispatch_consumer().name)


def _durable(name: str) -> ConsumerConfig:
    return ConsumerConfig(durable_name=name, name=name, deliver_policy=DeliverPolicy.ALL)


# --- the services themselves --------------------------------------------------------------------


def _settings_class(service: str) -> type[TavernSettings]:
    module = importlib.import_module(f"tavern_{service}.config")
    found = [
        value
        for value in vars(module).values()
        if isinstance(value, type)
        and issubclass(value, TavernSettings)
        and value is not TavernSettings
    ]
    assert len(found) == 1, f"tavern_{service}.config should define one settings class"
    return found[0]


async def _ready(port: int) -> bool:
    async with httpx.AsyncClient() as http:
        try:
            response = await http.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
        except httpx.HTTPError:
            return False
    return response.status_code == 200


async def test_every_service_turns_ready_logged_in_as_its_own_user(
    secured: Secured, database_url: str, tmp_path: Path
) -> None:
    async with _services(secured, database_url, tmp_path):
        for entry in catalog.SERVICES:
            reply = await secured.users["operator"].nc.request(
                subjects.rpc(entry.name, "ping"), b"{}", timeout=3
            )
            assert json.loads(reply.data)["service"] == entry.name


async def test_the_demo_conversation_runs_with_every_process_as_its_own_user(
    secured: Secured, database_url: str, tmp_path: Path
) -> None:
    """The demo `tavern up` plays (chat, a memory write, a recall, /compact), sent as the
    operator (it follows its session's log, which the `client` login may not read) to the four
    services logged in as theirs: every turn completes promptly and no process is refused
    anything (a refused request waits out its deadline unnoticed)."""
    url = secured.server.url.replace(
        "nats://", f"nats://operator:{secured.server.password('operator')}@"
    )
    with structlog.testing.capture_logs() as logs:
        async with _services(secured, database_url, tmp_path):
            started = asyncio.get_running_loop().time()
            result = await demo.play(url, out=io.StringIO(), colour=False, turn_timeout=30)
            took = asyncio.get_running_loop().time() - started
    assert result.outcomes == ("completed",) * len(demo.SCRIPT)
    refused = [
        str(e["error"])
        for e in logs
        if "permissions violation" in str(e.get("error", ""))
        # the projector asks once to delete a consumer it read with, then leaves them to expire
        and "$js.api.consumer.delete." not in str(e["error"])
    ]
    assert refused == []
    asked_to_delete = [e for e in logs if "$js.api.consumer.delete." in str(e.get("error", ""))]
    assert len(asked_to_delete) <= 1
    assert took < PROMPT_DEMO_S, f"the demo took {took:.1f} s"
    for user in secured.users.values():
        assert user.errors == [], (user.name, user.errors)


PROMPT_DEMO_S = 8.0
"""Four turns with the offline model take well under a second each; a refused request costs
its whole deadline (1 to 6 s) every time."""


@asynccontextmanager
async def _services(secured: Secured, database_url: str, tmp_path: Path) -> AsyncIterator[None]:
    """The four services in this process, each logged in as its own user, until exit."""
    stop = asyncio.Event()
    runs, ports = [], {}
    picked = iter(free_ports(len(catalog.SERVICES)))
    for entry in catalog.SERVICES:
        ports[entry.name] = next(picked)
        settings = _settings_class(entry.name)(
            nats_url=secured.server.url,
            nats_user=entry.name,
            nats_password=secured.server.password(entry.name),
            database_url=database_url,
            health_port=ports[entry.name],
            data_dir=tmp_path / entry.name,
            shutdown_grace_s=2,
        )
        app = entry.app().build_app(settings)
        runs.append(asyncio.create_task(serve(entry.name, app, settings, stop)))
    try:
        for port in ports.values():
            await eventually(partial(_ready, port), timeout=30, interval=0.2)
        yield
    finally:
        stop.set()
        codes = await asyncio.gather(*runs)
    assert codes == [0] * len(runs)


# --- replies, durables and every subject, one by one (both configs) ------------------------------

SERVICE_USERS = ("loop", "ledger", "projector", "consolidator")
NON_OPERATORS = (*SERVICE_USERS, "client")


def _subscription_refused(user: User, subject: str) -> bool:
    wanted = f'permissions violation for subscription to "{subject}"'.lower()
    return any(wanted in e.lower() for e in user.errors)


@pytest.mark.parametrize("user", NON_OPERATORS)
async def test_no_user_may_listen_on_the_shared_inbox_or_another_users(
    secured: Secured, user: str
) -> None:
    sniffer = secured.users[user]
    targets = ["_INBOX.>", "_INBOX.*", ">", *(f"_INBOX_{u}.>" for u in natsconf.USERS if u != user)]
    for subject in targets:
        await sniffer.nc.subscribe(subject)
    await sniffer.nc.flush()
    for subject in targets:
        assert await eventually(partial(_subscription_refused, sniffer, subject), timeout=3)
    own = await sniffer.nc.subscribe(f"_INBOX_{user}.>")
    await sniffer.nc.flush()
    await asyncio.sleep(0.2)
    assert not _subscription_refused(sniffer, f"_INBOX_{user}.>")
    await own.unsubscribe()


async def test_no_user_receives_another_users_rpc_reply(secured: Secured) -> None:
    """The ledger answers the loop's `memory.search`; every other user listens on everything it
    may subscribe to plus the shared and the loop's inbox: only the loop gets the reply."""
    ledger, loop = secured.users["ledger"], secured.users["loop"]
    secret = b'{"hits": ["what the user told the character in private"]}'

    async def answer(msg: Msg) -> None:
        await msg.respond(secret)

    await ledger.nc.subscribe(subjects.rpc("ledger", "memory.search"), cb=answer)
    overheard: list[tuple[str, bytes]] = []
    for name in ("projector", "consolidator", "client"):
        sniffer = secured.users[name]
        for subject in ("_INBOX.>", "_INBOX_loop.>", f"_INBOX_{name}.>", "tavern.>", "$JS.>"):

            async def heard(msg: Msg, who: str = name) -> None:
                overheard.append((who, msg.data))

            await sniffer.nc.subscribe(subject, cb=heard)
        await flushed(sniffer.nc)
    await flushed(ledger.nc)
    reply = await loop.nc.request(subjects.rpc("ledger", "memory.search"), b"{}", timeout=3)
    assert reply.data == secret
    assert reply.subject.startswith("_INBOX_loop.")
    await asyncio.sleep(0.3)
    assert [who for who, data in overheard if data == secret] == []


def _owned() -> list[tuple[str, ConsumerSpec]]:
    return [(e.name, c) for e in catalog.SERVICES for c in e.consumers()]


THEFTS = [
    (thief, owner, consumer)
    for owner, consumer in _owned()
    for thief in (*SERVICE_USERS, "client")
    if thief != owner
]


@pytest.mark.parametrize(
    ("thief", "owner", "consumer"),
    THEFTS,
    ids=[f"{t}-steals-{c.name}" for t, _, c in THEFTS],
)
async def test_no_user_pulls_or_acks_another_services_durable(
    secured: Secured, thief: str, owner: str, consumer: ConsumerSpec
) -> None:
    """The thief's pull is refused and the message stays for its owner, whose pending
    delivery the thief cannot ack either."""
    stealer, rightful = secured.users[thief], secured.users[owner]
    await secured.operator.publish(_concrete(consumer.filter_subjects[0]), b"{}")
    next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{consumer.stream}.{consumer.name}"
    inbox = stealer.nc.new_inbox()
    stolen = await stealer.nc.subscribe(inbox)
    await stealer.nc.publish(next_subject, b'{"batch": 1, "expires": 500000000}', reply=inbox)
    await stealer.nc.flush()
    assert await stealer.refused(next_subject)
    with pytest.raises(nats.errors.TimeoutError):
        await stolen.next_msg(timeout=0.7)
    pull = await rightful.js.pull_subscribe_bind(consumer.name, stream=consumer.stream)
    [msg] = await pull.fetch(1, timeout=3)
    assert msg.metadata.num_delivered == 1
    assert msg.reply.startswith(f"$JS.ACK.{consumer.stream}.{consumer.name}.")
    await stealer.nc.publish(msg.reply, b"+ACK")
    await stealer.nc.flush()
    assert await stealer.refused(msg.reply)
    info = await secured.operator.consumer_info(consumer.stream, consumer.name)
    assert info.num_ack_pending == 1, "the thief's ack must not count"
    await msg.ack_sync()
    assert rightful.errors == []


def _matches(pattern: str, subject: str) -> bool:
    """NATS wildcard matching of a concrete subject (`*` one token, `>` one or more)."""
    want, have = pattern.split("."), subject.split(".")
    for index, token in enumerate(want):
        if token == ">":
            return len(have) > index
        if index >= len(have) or (token != "*" and token != have[index]):
            return False
    return len(want) == len(have)


SENSITIVE_PUBLISH = [
    *(
        subjects.rpc("ledger", op)
        for op in (
            "delete",
            "export",
            "import",
            "rollback",
            "redact",
            "correct",
            "release",
            "quarantine",
            "audit",
            "inspect",
            "recall",
            "memory.search",
            "observation.propose",
            "observation.propose_batch",
            "consolidation.rule.list",
        )
    ),
    *(subjects.rpc("consolidator", op) for op in ("dream.run", "rules.decide", "approvals.next")),
    *(subjects.rpc("projector", op) for op in ("status", "sessions.list", "history.search")),
    subjects.rpc("loop", "ping"),
    "_INBOX.x",
    "_INBOX_loop.x",
    "tavern.session.s1.turn.start",
    "tavern.input.s1.message",
    "tavern.ledger.u1.memory.changed",
    "tavern.asset.card.c1.imported",
    "$JS.API.STREAM.DELETE.SESSIONS",
    "$JS.API.STREAM.PURGE.SESSIONS",
    "$JS.API.CONSUMER.DELETE.SESSIONS.projector-chat",
    "$JS.API.CONSUMER.CREATE.SESSIONS.rogue",
    "$JS.API.CONSUMER.DURABLE.CREATE.SESSIONS.rogue",
]


def _publish_candidates() -> list[str]:
    """Every subject any user's rules name (made concrete), plus subjects nobody should reach."""
    from tavern_cli import access

    found = set(SENSITIVE_PUBLISH)
    for rules in access.permissions():
        for pattern in (*rules.publish, *rules.deny_publish):
            if pattern != ">":
                found.add(_concrete(pattern))
    return sorted(found)


def _publish_allowed(user: str, subject: str) -> bool:
    from tavern_cli import access

    [rules] = [p for p in access.permissions() if p.user == user]
    allowed = any(_matches(p, subject) for p in rules.publish)
    return allowed and not any(_matches(d, subject) for d in rules.deny_publish)


# What the least-privilege rules must never grant, whatever the generated lists say.
NEVER = {
    "loop": [
        *(subjects.rpc("ledger", op) for op in ("delete", "export", "import", "rollback")),
        *(subjects.rpc("ledger", op) for op in ("redact", "correct", "observation.propose")),
        "tavern.ledger.u1.memory.changed",
        "$JS.API.CONSUMER.DELETE.SESSIONS.projector-chat",
    ],
    "ledger": [subjects.rpc("ledger", "export"), "tavern.session.s1.turn.start"],
    "projector": ["tavern.session.s1.turn.start", subjects.rpc("ledger", "recall")],
    "consolidator": [subjects.rpc("ledger", op) for op in ("recall", "export", "delete")],
    "client": [
        subjects.rpc("ledger", "recall"),
        subjects.rpc("ledger", "export"),
        subjects.rpc("ledger", "memory.search"),
        subjects.rpc("projector", "status"),
        "tavern.session.s1.turn.start",
        "$JS.API.CONSUMER.MSG.NEXT.SESSIONS.projector-chat",
    ],
}


@pytest.mark.parametrize("user", NON_OPERATORS)
async def test_each_users_publish_rights_checked_subject_by_subject(
    secured: Secured, user: str
) -> None:
    """Each candidate subject is published on its own; the server refuses exactly those the
    rules do not allow, and never one of the subjects in NEVER is allowed."""
    for subject in NEVER[user]:
        assert not _publish_allowed(user, subject), (user, subject)
    client = secured.users[user]
    candidates = _publish_candidates()
    for subject in candidates:
        await client.nc.publish(subject, b"")
    await client.nc.flush()
    denied = [s for s in candidates if not _publish_allowed(user, s)]
    assert await eventually(lambda: all(_refused_now(client, s) for s in denied), timeout=5)
    wrongly = [s for s in candidates if _publish_allowed(user, s) and _refused_now(client, s)]
    assert wrongly == []
    assert set(NEVER[user]) <= set(denied)


def _refused_now(user: User, subject: str) -> bool:
    wanted = f'permissions violation for publish to "{subject}"'.lower()
    return any(wanted in e.lower() for e in user.errors)


@pytest.mark.parametrize("user", NON_OPERATORS)
async def test_each_users_subscribe_rights_checked_subject_by_subject(
    secured: Secured, user: str
) -> None:
    from tavern_cli import access

    [rules] = [p for p in access.permissions() if p.user == user]
    candidates = sorted(
        {
            _concrete(pattern)
            for p in access.permissions()
            for pattern in p.subscribe
            if pattern != ">"
        }
        | {"_INBOX.x", "tavern.ledger.u1.memory.changed", "tavern.rpc.ledger.recall"}
    )
    client = secured.users[user]
    for subject in candidates:
        await client.nc.subscribe(subject)
    await client.nc.flush()
    allowed = {
        s
        for s in candidates
        if any(_matches(p, s) for p in rules.subscribe)
        and not any(_matches(d, s) for d in rules.deny_subscribe)
    }
    denied = [s for s in candidates if s not in allowed]
    assert await eventually(
        lambda: all(_subscription_refused(client, s) for s in denied), timeout=5
    )
    assert [s for s in allowed if _subscription_refused(client, s)] == []
    assert "_INBOX.x" in denied


@pytest.mark.parametrize("user", natsconf.USERS)
async def test_anonymous_and_wrong_password_logins_are_refused(server: Server, user: str) -> None:
    for attempt in (
        {},
        {"user": user, "password": "not-" + server.password(user)},
        {"user": user, "password": ""},
        {"user": f"{user}-nobody", "password": server.password(user)},
    ):
        with pytest.raises(Exception, match=r"(?i)authorization"):
            await nats.connect(
                server.url,
                allow_reconnect=False,
                max_reconnect_attempts=1,
                connect_timeout=2,
                error_cb=_ignore,
                **attempt,
            )
    good = await _login(server, user)
    await good.nc.close()


async def _ignore(_: Exception) -> None:
    return None
