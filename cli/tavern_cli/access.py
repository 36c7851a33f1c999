"""Who may use which NATS subject: the one description of the users of the TAVERN account.

`render_accounts()` writes it as nats-server config. `deploy/nats/accounts.conf` is its output
(`python -m tavern_cli.access > deploy/nats/accounts.conf`; a test keeps the two equal) and the
embedded server of `tavern up` and of the test harness includes the same text, so production
and embedded mode enforce the same rules.

The rules:
- replies: each user has a private inbox prefix, `_INBOX_<user>` (the services pass it to
  nats-py as `inbox_prefix`), and may subscribe only to `_INBOX_<user>.>`; nobody but the
  operator can listen on another user's replies.
- durable consumers: pull (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>`), ack
  (`$JS.ACK.<stream>.<durable>.>`) and max-deliveries advisories per durable name. The
  projector reads with unnamed short-lived consumers too, so it may pull any consumer of its
  streams except, explicitly denied, every other service's durable.
- consumers are managed by the operator alone: every other user is denied, explicitly, every
  consumer-create form that takes its name from the subject (`$JS.API.CONSUMER.DURABLE.CREATE.`,
  `$JS.API.CONSUMER.CREATE.<stream>.<name>[.<filter>]`) and every consumer and stream
  administration subject (`MANAGED`). The bare `$JS.API.CONSUMER.CREATE.<stream>` takes the
  name from the request body, so whoever may publish it may rewrite any consumer of that
  stream: only the services that read with unnamed consumers get it, on their own streams.
- session logs: the client may not read them at all (no subscription on `tavern.session.>`, no
  consumer, direct get or stream info on SESSIONS): a log is read through a service that
  checks the principal (the gateway's event stream) or by the operator.
- requests: each service may ask only the RPCs its code calls; RPC answerers reply through
  `allow_responses` (no publish right on anyone's inbox).
- passwords: `$NATS_<USER>_PASSWORD` in the server's environment; a missing one stops the
  server at start.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from tavern_cli import catalog
from tavern_runtime.bus import inbox_prefix_of
from tavern_runtime.credentials import NATS_USERS
from tavern_runtime.provision import ConsumerSpec

LOOP_RPCS = (
    "ledger.recall",
    "ledger.query",
    "ledger.memory.search",
    "ledger.memory.read",
    "ledger.memory.write",
    "ledger.memory.update",
    "ledger.memory.forget",
    "ledger.variable.get",
    "ledger.variable.set",
    "ledger.variable.patch",
    "ledger.variable.delete",
    "ledger.variable.list",
    "projector.character.get",
    "projector.lore.search",
    "projector.history.search",
    "projector.scene.get",
    "consolidator.approvals.next",
)
"""Recall and the memory, variable and query tools (ledger), cards, lore, history and scenes
(projector), style promotions awaiting approval at a turn's first step (consolidator)."""

CONSOLIDATOR_RPCS = (
    "ledger.observation.propose",
    "ledger.observation.propose_batch",
    "ledger.claim.supersede",
    "ledger.consolidation.>",
    "ledger.stats",
)
"""Proposed observations, claims a model judged superseded, the rule and expression-candidate
operations of consolidation, and the ownership check of a user's review request (`stats` asked
as that user)."""

GATEWAY_CONSOLIDATOR_RPCS = (
    "consolidator.rules.list",
    "consolidator.rules.decide",
    "consolidator.expression.list",
    "consolidator.expression.decide",
    "consolidator.dream.review",
)
"""The human gate of the panel: rule drafts, style and pool candidates, their decisions."""

CLIENT_RPCS = (
    "projector.character.get",
    "projector.lore.search",
    "projector.history.search",
    "projector.scene.get",
    "projector.sessions.list",
)
"""What a front end asks: cards, lore, history, scenes and the session list."""


MANAGED = (
    "$JS.API.CONSUMER.DURABLE.CREATE.>",
    "$JS.API.CONSUMER.CREATE.*.>",
    "$JS.API.CONSUMER.DELETE.>",
    "$JS.API.CONSUMER.PAUSE.>",
    "$JS.API.CONSUMER.RESET.>",
    "$JS.API.CONSUMER.UNPIN.>",
    "$JS.API.CONSUMER.LEADER.STEPDOWN.>",
    "$JS.API.STREAM.CREATE.>",
    "$JS.API.STREAM.UPDATE.>",
    "$JS.API.STREAM.DELETE.>",
    "$JS.API.STREAM.PURGE.>",
    "$JS.API.STREAM.MSG.DELETE.>",
    "$JS.API.STREAM.SNAPSHOT.>",
    "$JS.API.STREAM.RESTORE.>",
    "$JS.API.STREAM.LEADER.STEPDOWN.>",
    "$JS.API.STREAM.PEER.REMOVE.>",
)
"""Denied to every user but the operator, whatever its allow list says: creating a consumer
with its name (or a durable name) in the subject, hence creating or updating any durable, in
every form nats-server 2.15 has (`DURABLE.CREATE.<stream>.<durable>`, `CREATE.<stream>.<name>`,
`CREATE.<stream>.<name>.<filter>`); deleting, pausing, resetting, unpinning a consumer or
moving its leader; and every change to a stream."""

SESSION_LOGS = (
    "$JS.API.CONSUMER.INFO.SESSIONS.>",
    "$JS.API.CONSUMER.MSG.NEXT.SESSIONS.>",
    "$JS.API.CONSUMER.LIST.SESSIONS",
    "$JS.API.CONSUMER.NAMES.SESSIONS",
    "$JS.API.STREAM.INFO.SESSIONS",
    "$JS.API.STREAM.MSG.GET.SESSIONS",
    "$JS.API.DIRECT.GET.SESSIONS",
    "$JS.API.DIRECT.GET.SESSIONS.>",
    "$JS.FC.SESSIONS.>",
)
"""Every way to read SESSIONS through the JetStream API but creating a consumer: denied to the
client (with every bare create, `$JS.API.CONSUMER.CREATE.*`, which names any consumer from its
body), whose reads of a log go through a service that checks its principal."""


@dataclass(frozen=True)
class Permissions:
    user: str
    comment: str
    publish: tuple[str, ...]
    subscribe: tuple[str, ...]
    deny_publish: tuple[str, ...] = ()
    responds: bool = False
    deny_subscribe: tuple[str, ...] = ()


@dataclass(frozen=True)
class Durables:
    """The durable consumers of every service, by owner."""

    by_service: dict[str, tuple[ConsumerSpec, ...]] = field(default_factory=dict)

    @classmethod
    def of_catalog(cls) -> Durables:
        return cls({s.name: s.consumers() for s in catalog.SERVICES})

    def own(self, service: str) -> tuple[ConsumerSpec, ...]:
        return self.by_service.get(service, ())

    def others(self, service: str, streams: Iterable[str]) -> list[ConsumerSpec]:
        wanted = set(streams)
        return [
            c
            for owner, specs in self.by_service.items()
            if owner != service
            for c in specs
            if c.stream in wanted
        ]


def rpc(name: str) -> str:
    return f"tavern.rpc.{name}"


def _pull(specs: Iterable[ConsumerSpec]) -> list[str]:
    return [
        subject
        for c in specs
        for subject in (
            f"$JS.API.CONSUMER.INFO.{c.stream}.{c.name}",
            f"$JS.API.CONSUMER.MSG.NEXT.{c.stream}.{c.name}",
            f"$JS.ACK.{c.stream}.{c.name}.>",
        )
    ]


def _advisories(specs: Iterable[ConsumerSpec]) -> list[str]:
    return [f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{c.stream}.{c.name}" for c in specs]


def _read(streams: Sequence[str], *, unnamed: Sequence[str] | None = None) -> list[str]:
    """Stream info and gets of `streams`; unnamed (ordered, ephemeral) consumers of `unnamed`
    (default: all of them)."""
    found = ["$JS.API.INFO"]
    for s in streams:
        found += [f"$JS.API.STREAM.INFO.{s}", f"$JS.API.STREAM.MSG.GET.{s}"]
        found += [f"$JS.API.DIRECT.GET.{s}", f"$JS.API.DIRECT.GET.{s}.>"]
    for s in streams if unnamed is None else unnamed:
        found += [
            f"$JS.API.CONSUMER.CREATE.{s}",
            f"$JS.API.CONSUMER.INFO.{s}.*",
            f"$JS.FC.{s}.>",
        ]
    return found


def _inbox(user: str) -> str:
    return f"{inbox_prefix_of(user)}.>"


def permissions(durables: Durables | None = None) -> list[Permissions]:
    """Every user's rules; every one but the operator is denied `MANAGED` on top."""
    return [
        p if p.user == "operator" else replace(p, deny_publish=(*MANAGED, *p.deny_publish))
        for p in _granted(durables or Durables.of_catalog())
    ]


def _granted(d: Durables) -> list[Permissions]:
    projected = ("SESSIONS", "LEDGER", "ASSETS")
    return [
        Permissions(
            "operator",
            "Operator and `tavern` CLI: init (streams, consumers, buckets), status, replay,\n"
            "restore, ledger administration. Everything, replies of every user included.",
            publish=(">",),
            subscribe=(">",),
        ),
        Permissions(
            "loop",
            "Agent loop: writes session logs, consumes inputs, holds session leases, and asks\n"
            "only the RPCs it calls (recall, memory, variable and query tools of the ledger;\n"
            "cards, lore, history, scenes of the projector; approvals of the consolidator).",
            publish=(
                "tavern.session.>",
                "tavern.dlq.loop",
                *(rpc(name) for name in LOOP_RPCS),
                "$KV.tavern_leases.>",
                *_read(("SESSIONS", "INPUTS", "KV_tavern_leases"), unnamed=()),
                *_pull(d.own("loop")),
            ),
            subscribe=(
                _inbox("loop"),
                "tavern.input.>",
                "tavern.rpc.loop.>",
                *_advisories(d.own("loop")),
            ),
            responds=True,
        ),
        Permissions(
            "ledger",
            "Ledger: consumes session logs with its own durables (and gets by subject),\n"
            "commits facts to LEDGER, answers tavern.rpc.ledger.*; asks no other service.\n"
            "It opens no unnamed consumer, so it cannot rewrite another's durable either.",
            publish=(
                "tavern.ledger.>",
                "tavern.dlq.ledger",
                *_read(("SESSIONS", "LEDGER"), unnamed=()),
                *_pull(d.own("ledger")),
            ),
            subscribe=(_inbox("ledger"), "tavern.rpc.ledger.>", *_advisories(d.own("ledger"))),
            responds=True,
        ),
        Permissions(
            "projector",
            "Projector: read models from SESSIONS, LEDGER and ASSETS; answers\n"
            "tavern.rpc.projector.*. It reads with unnamed consumers too (pull on any name of\n"
            "its streams) but every other service's durable is denied. It never writes a\n"
            "session log (restores run as the operator).",
            publish=(
                "tavern.dlq.projector",
                *_read(projected),
                *(f"$JS.API.CONSUMER.MSG.NEXT.{s}.*" for s in projected),
                *_pull(d.own("projector")),
            ),
            deny_publish=tuple(
                subject
                for c in d.others("projector", projected)
                for subject in (
                    f"$JS.API.CONSUMER.MSG.NEXT.{c.stream}.{c.name}",
                    f"$JS.ACK.{c.stream}.{c.name}.>",
                )
            ),
            subscribe=(
                _inbox("projector"),
                "tavern.rpc.projector.>",
                *_advisories(d.own("projector")),
            ),
            responds=True,
        ),
        Permissions(
            "consolidator",
            "Consolidator: reads LEDGER and SESSIONS with its own durables, proposes\n"
            "observations and runs consolidation through the ledger's RPCs. It opens no\n"
            "unnamed consumer, so it cannot rewrite another's durable either.",
            publish=(
                "tavern.dlq.consolidator",
                *(rpc(name) for name in CONSOLIDATOR_RPCS),
                *_read(("SESSIONS", "LEDGER"), unnamed=()),
                *_pull(d.own("consolidator")),
            ),
            subscribe=(
                _inbox("consolidator"),
                "tavern.rpc.consolidator.>",
                *_advisories(d.own("consolidator")),
            ),
            responds=True,
        ),
        Permissions(
            "gateway",
            "Gateway (the web app): its signed-in users' inputs and their RPCs to the ledger\n"
            "and the projector, session logs followed (ordered consumers, direct gets),\n"
            "imported cards published to ASSETS, the owner's read-only view of streams and\n"
            "consumers, its ping. It can neither write a session log, read LEDGER, nor pull\n"
            "or ack a durable.",
            publish=(
                "tavern.input.>",
                "tavern.asset.>",
                "tavern.rpc.projector.>",
                "tavern.rpc.ledger.>",
                *(rpc(name) for name in GATEWAY_CONSOLIDATOR_RPCS),
                "tavern.rpc.*.ping",
                "$JS.API.INFO",
                *(
                    f"$JS.API.STREAM.INFO.{s}"
                    for s in ("SESSIONS", "INPUTS", "ASSETS", "LEDGER", "DLQ")
                ),
                "$JS.API.CONSUMER.LIST.*",
                "$JS.API.DIRECT.GET.SESSIONS",
                "$JS.API.DIRECT.GET.SESSIONS.>",
                "$JS.API.STREAM.MSG.GET.SESSIONS",
                "$JS.API.CONSUMER.CREATE.SESSIONS",
                "$JS.API.CONSUMER.INFO.SESSIONS.*",
                "$JS.FC.SESSIONS.>",
            ),
            subscribe=(_inbox("gateway"), "tavern.session.>", "tavern.rpc.gateway.>"),
            responds=True,
        ),
        Permissions(
            "client",
            "Client (a front end that holds no key of its own): sends inputs and asks the\n"
            "projector's read RPCs, which answer with the principal's own sessions only. It\n"
            "cannot read a session log (no subscription, consumer, direct get or stream info\n"
            "on SESSIONS: logs are followed through the gateway), create, change or pull any\n"
            "consumer, write a session log, touch the ledger or read another user's replies.",
            publish=("tavern.input.>", *(rpc(name) for name in CLIENT_RPCS), "$JS.API.INFO"),
            subscribe=(_inbox("client"),),
            deny_publish=("$JS.API.CONSUMER.CREATE.*", *SESSION_LOGS),
            deny_subscribe=("tavern.session.>", "$JS.>"),
        ),
    ]


HEADER = """\
# AgentTavern NATS users: one account (TAVERN, JetStream enabled) and one user per service, each
# allowed only the subjects its code uses. Included by single.conf and n1..n3.conf.
#
# GENERATED by `python -m tavern_cli.access` from cli/tavern_cli/access.py (the embedded server
# of `tavern up` includes the same text); edit that module, not this file. A test keeps them equal.
#
# Passwords come from the environment of nats-server ($NATS_<USER>_PASSWORD); a missing variable
# makes the server refuse to start. Services log in with TAVERN_NATS_USER / TAVERN_NATS_PASSWORD.
#
# Replies: each user has its own inbox prefix _INBOX_<user> (TavernSettings passes it to nats-py)
# and may subscribe to _INBOX_<user>.> only, so no user receives another's RPC or API replies.
# RPC answerers get allow_responses: they reply without any publish right on an inbox.
# Durable consumers: pull, ack and advisories per durable name. Durables are created by
# `tavern init` (operator) only: every other user is denied every create form that names the
# consumer in its subject (DURABLE.CREATE, CREATE.<STREAM>.<NAME>[.<FILTER>]), and every
# consumer and stream administration subject. Services that read with unnamed consumers
# (ordered replays: the projector, the gateway) may publish the bare
# $JS.API.CONSUMER.CREATE.<STREAM> of their streams; the loop, the ledger, the consolidator and
# the client may not, and the client reads nothing of SESSIONS: a log is followed through the
# gateway.
# No service may delete a consumer: the projector's read consumers expire on their own.
# Residual risk (verified on 2.15.1): a bare create by a service that names an existing durable
# of the same stream rewrites that durable's mutable fields; `tavern status` shows it red and
# `tavern init --apply-drift` puts it back and replays what it skipped.
"""


def _list(name: str, items: Sequence[str], indent: str) -> list[str]:
    lines = [f"{indent}{name}: ["]
    lines += [f'{indent}  "{item}"' for item in items]
    lines.append(f"{indent}]")
    return lines


def _user(p: Permissions, password: str) -> list[str]:
    pad = "      "
    lines = [f"{pad}# {line}".rstrip() for line in p.comment.splitlines()]
    lines += [f"{pad}{{", f"{pad}  user: {p.user}", f"{pad}  password: {password}"]
    lines.append(f"{pad}  permissions: {{")
    lines.append(f"{pad}    publish: {{")
    lines += _list("allow", p.publish, pad + "      ")
    if p.deny_publish:
        lines += _list("deny", p.deny_publish, pad + "      ")
    lines.append(f"{pad}    }}")
    lines.append(f"{pad}    subscribe: {{")
    lines += _list("allow", p.subscribe, pad + "      ")
    if p.deny_subscribe:
        lines += _list("deny", p.deny_subscribe, pad + "      ")
    lines.append(f"{pad}    }}")
    if p.responds:
        lines.append(f"{pad}    allow_responses: true")
    lines += [f"{pad}  }}", f"{pad}}}"]
    return lines


def password_variable(user: str) -> str:
    return f"NATS_{user.upper()}_PASSWORD"


def render_accounts(durables: Durables | None = None) -> str:
    """The `accounts { TAVERN { ... } }` block, passwords as `$NATS_<USER>_PASSWORD`."""
    users = permissions(durables)
    assert tuple(p.user for p in users) == NATS_USERS
    body = ["accounts {", "  TAVERN {", "    jetstream: enabled", "", "    users: ["]
    for index, p in enumerate(users):
        if index:
            body.append("")
        body += _user(p, f"${password_variable(p.user)}")
    body += ["    ]", "  }", "}"]
    return HEADER + "\n" + "\n".join(body) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render_accounts())
