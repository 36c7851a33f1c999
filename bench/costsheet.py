"""The per-turn cost sheet of a load run: what one turn costs each process, stream and the
database, and how far each service's consumers fell behind while the load ran.

Counters are read before and after the load (`Counters`); the sheet is their difference divided
by the turns (`sheet`, pure). CPU is read from /proc (Postgres: the postmaster, its live
backends and the backends that exited), stream figures from JetStream stream info, bus traffic
from nats-server's monitoring `/varz` (RPCs included), transactions from `pg_stat_database`, WAL
records, writes and fsyncs from `pg_stat_wal` and `pg_stat_io` and its bytes from the WAL's
insert position, statements per service role from `pg_stat_statements` when the server
preloads it (`enable_statement_stats` does so for a stack of the bench).

CPU is also read once more after the load, when every consumer has caught up
(`CostSheet.with_catch_up`): the projector and the consolidator yield the CPU to the turns
(niceness 10) and leave some of their work for later, and that work counts per turn too, in a
column of its own ("+ caught up") beside what the load's window measured.

Backends report their `pg_stat_database` and `pg_stat_wal` counts when they flush their
statistics: at most once a second while busy, within 10 s once idle. The counts of a run's last
seconds can therefore come after the sheet is read. Over a bench's minutes that is a small
share; over a run of a few seconds the transaction and fsync counts can even read zero. WAL
bytes (from the insert position) and statements (`pg_stat_statements`) are exact at once.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import asyncpg
import httpx

from tavern_cli import catalog

if TYPE_CHECKING:
    from tests.reliability.stack import Stack

PG_COUNTERS = ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted")
BUS_COUNTERS = ("in_msgs", "in_bytes", "out_msgs", "out_bytes")
TOP_STATEMENTS = 12
STATEMENT_CHARS = 160
TIMELINE_POINTS = 8
"""How many points of each consumer's lag the printed sheet shows (the JSON keeps them all)."""


@dataclass(frozen=True)
class Counters:
    """Cumulative counters of a running stack at one moment."""

    at: float
    cpu_s: Mapping[str, float]
    streams: Mapping[str, tuple[int, int]]
    """stream -> (messages, bytes) stored."""
    bus: Mapping[str, int] = field(default_factory=dict)
    """nats-server totals (`/varz`): messages and bytes in and out, core RPCs included."""
    clients: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    """NATS user -> its connections' `/connz` counters (`in` = from the client, `out` = to it)."""
    database: Mapping[str, int] = field(default_factory=dict)
    """`pg_stat_database` of the stack's database and `pg_stat_wal`."""
    statements: Mapping[str, int] | None = None
    """`<role>: <statement>` -> times executed (`pg_stat_statements`), None when it is not
    loaded."""
    machine: Mapping[str, int] = field(default_factory=dict)
    """The machine's CPU time by kind (`/proc/stat`, clock ticks over all cores)."""


@dataclass(frozen=True)
class LagPoint:
    """Each durable consumer's lag (pending + unacknowledged) `at` seconds into the load."""

    at: float
    lags: Mapping[str, int]


@dataclass(frozen=True)
class CostSheet:
    turns: int
    seconds: float
    cpu_ms: dict[str, float]
    """process -> CPU milliseconds per turn."""
    streams: dict[str, tuple[float, float]]
    """stream -> (messages, bytes) per turn."""
    bus: dict[str, float]
    clients: dict[str, dict[str, float]]
    """NATS user -> messages and bytes per turn, to and from the server."""
    database: dict[str, float]
    statements: dict[str, float] | None
    """role -> statements per turn."""
    top_statements: list[tuple[str, float]]
    """The statements run most per turn, `<role>: <statement>`."""
    consumers: dict[str, str]
    """consumer -> the service that reads it."""
    lags: list[LagPoint]
    machine: dict[str, float] = field(default_factory=dict)
    """Share of the machine's CPU time over the run: `busy`, `iowait`, `idle`, and `steal`
    (taken by the host of a virtual machine: the same code runs slower the more of it)."""
    catch_up_ms: dict[str, float] = field(default_factory=dict)
    """process -> CPU milliseconds per turn spent after the load, until every consumer had
    caught up (deferred projections, consolidation): work the turns caused that the load's
    window does not hold."""
    catch_up_s: float = 0.0

    @property
    def cpu_total_ms(self) -> float:
        return sum(self.cpu_ms.values())

    @property
    def catch_up_total_ms(self) -> float:
        return sum(self.catch_up_ms.values())

    def with_catch_up(self, during: Counters, after: Counters) -> CostSheet:
        """This sheet with the CPU spent between `during` (the load's end) and `after` (every
        consumer caught up), per turn of the load."""
        spent = per_turn(during.cpu_s, after.cpu_s, self.turns)
        return replace(
            self,
            catch_up_ms={k: v * 1000 for k, v in spent.items()},
            catch_up_s=after.at - during.at,
        )

    def lines(self) -> list[str]:
        out = [f"cost per turn ({self.turns} turns in {self.seconds:.1f} s)"]
        late = bool(self.catch_up_ms)
        after = f" {'+ caught up':>11} {'= all':>6}" if late else ""
        out += [f"  {'process':14} {'CPU ms/turn':>12} {'share':>6}{after}"]
        total = self.cpu_total_ms or 1.0
        for name, ms in sorted(self.cpu_ms.items(), key=lambda kv: -kv[1]):
            more = self.catch_up_ms.get(name, 0.0)
            tail = f" {more:>11.1f} {ms + more:>6.1f}" if late else ""
            out.append(f"  {name:14} {ms:>12.1f} {ms / total:>6.0%}{tail}")
        whole = self.cpu_total_ms + self.catch_up_total_ms
        tail = f" {'':>6} {self.catch_up_total_ms:>11.1f} {whole:>6.1f}" if late else ""
        out.append(f"  {'all':14} {self.cpu_total_ms:>12.1f}{tail}")
        if late:
            out.append(
                f"  (+ caught up: CPU after the last turn ended, {self.catch_up_s:.1f} s until"
                " every consumer had caught up: deferred projections and consolidation)"
            )
        if self.machine:
            out.append(
                "  machine, all cores: "
                + ", ".join(f"{k} {v:.0%}" for k, v in self.machine.items())
            )
        out += ["", f"  {'stream':14} {'msgs/turn':>10} {'bytes/turn':>11}"]
        for name, (msgs, size) in sorted(self.streams.items()):
            out.append(f"  {name:14} {msgs:>10.1f} {size:>11,.0f}")
        if self.bus:
            out.append(
                "  bus (all subjects, RPCs included): "
                + ", ".join(f"{k} {v:,.1f}" for k, v in self.bus.items())
            )
        out += self._client_lines()
        out += [
            "",
            "  postgres per turn: " + ", ".join(_fmt(k, v) for k, v in self.database.items()),
        ]
        if self.statements is None:
            out.append("  statements: n/a (pg_stat_statements not loaded)")
        else:
            by_role = sorted(self.statements.items(), key=lambda kv: -kv[1])
            out.append("  statements per turn: " + ", ".join(_fmt(k, v) for k, v in by_role))
            out += [f"  {n:>8.2f}  {text[:100]}" for text, n in self.top_statements]
        out += ["", *self._lag_lines()]
        return out

    def _client_lines(self) -> list[str]:
        if not self.clients:
            return []
        out = ["", f"  {'bus client':14} {'msgs in':>8} {'msgs out':>9} {'kB in':>7} {'kB out':>7}"]
        for name, c in sorted(self.clients.items(), key=lambda kv: -kv[1].get("out_msgs", 0)):
            out.append(
                f"  {name[:14]:14} {c.get('in_msgs', 0):>8.1f} {c.get('out_msgs', 0):>9.1f}"
                f" {c.get('in_bytes', 0) / 1000:>7.1f} {c.get('out_bytes', 0) / 1000:>7.1f}"
            )
        return out

    def _lag_lines(self) -> list[str]:
        points = thin(self.lags, TIMELINE_POINTS)
        header = " ".join(f"{p.at:>6.0f}s" for p in points)
        out = [f"  {'consumer lag':24} {'service':13} {header}"]
        for name in sorted(self.consumers):
            row = " ".join(f"{p.lags.get(name, -1):>7}" for p in points)
            out.append(f"  {name:24} {self.consumers[name]:13} {row}")
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "turns": self.turns,
            "seconds": round(self.seconds, 2),
            "cpu_ms_per_turn": {k: round(v, 2) for k, v in self.cpu_ms.items()},
            "catch_up_cpu_ms_per_turn": {k: round(v, 2) for k, v in self.catch_up_ms.items()},
            "catch_up_seconds": round(self.catch_up_s, 2),
            "streams_per_turn": {
                k: {"messages": round(m, 2), "bytes": round(b, 1)}
                for k, (m, b) in self.streams.items()
            },
            "bus_per_turn": {k: round(v, 2) for k, v in self.bus.items()},
            "bus_clients_per_turn": {
                name: {k: round(v, 2) for k, v in c.items()} for name, c in self.clients.items()
            },
            "postgres_per_turn": {k: round(v, 3) for k, v in self.database.items()},
            "statements_per_turn": (
                None
                if self.statements is None
                else {k: round(v, 2) for k, v in self.statements.items()}
            ),
            "top_statements_per_turn": [[k, round(v, 2)] for k, v in self.top_statements],
            "consumers": self.consumers,
            "consumer_lag": [{"at": round(p.at, 2), **p.lags} for p in self.lags],
            "machine": {k: round(v, 4) for k, v in self.machine.items()},
        }


def _fmt(name: str, value: float) -> str:
    return f"{name} {value:,.0f}" if value >= 100 else f"{name} {value:.2f}"


MACHINE_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
"""The first eight fields of the `cpu` line of `/proc/stat`, in order."""


def machine_shares(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, float]:
    """Each kind of CPU time as a share of all of it between two `/proc/stat` readings."""
    spent = {k: after.get(k, 0) - before.get(k, 0) for k in MACHINE_FIELDS}
    total = sum(spent.values())
    if total <= 0:
        return {}
    busy = sum(spent[k] for k in ("user", "nice", "system", "irq", "softirq"))
    return {
        "busy": busy / total,
        "steal": spent["steal"] / total,
        "iowait": spent["iowait"] / total,
        "idle": spent["idle"] / total,
    }


def per_turn(
    before: Mapping[str, float], after: Mapping[str, float], turns: int
) -> dict[str, float]:
    """(after - before) / turns for every key of `after`; a key missing before counts from 0."""
    divisor = max(1, turns)
    return {k: (v - before.get(k, 0)) / divisor for k, v in after.items()}


def sheet(
    before: Counters,
    after: Counters,
    turns: int,
    lags: Sequence[LagPoint] = (),
    consumers: Mapping[str, str] | None = None,
) -> CostSheet:
    """The cost of `turns` turns from the counters around them."""
    cpu = {k: v * 1000 for k, v in per_turn(before.cpu_s, after.cpu_s, turns).items()}
    messages = per_turn(
        {k: m for k, (m, _) in before.streams.items()},
        {k: m for k, (m, _) in after.streams.items()},
        turns,
    )
    sizes = per_turn(
        {k: b for k, (_, b) in before.streams.items()},
        {k: b for k, (_, b) in after.streams.items()},
        turns,
    )
    statements, top = None, []
    if before.statements is not None and after.statements is not None:
        each = per_turn(before.statements, after.statements, turns)
        statements = by_role(each)
        top = sorted(((k, v) for k, v in each.items() if v > 0), key=lambda kv: -kv[1])
    return CostSheet(
        turns,
        after.at - before.at,
        cpu,
        {k: (messages[k], sizes[k]) for k in messages},
        per_turn(before.bus, after.bus, turns),
        {n: per_turn(before.clients.get(n, {}), c, turns) for n, c in after.clients.items()},
        per_turn(before.database, after.database, turns),
        statements,
        top[:TOP_STATEMENTS],
        dict(consumers or {}),
        list(lags),
        machine_shares(before.machine, after.machine),
    )


def thin(points: Sequence[LagPoint], most: int) -> list[LagPoint]:
    """At most `most` points spread evenly over `points`, the first and last kept."""
    if len(points) <= most:
        return list(points)
    step = (len(points) - 1) / (most - 1)
    return [points[round(i * step)] for i in range(most)]


def by_role(statements: Mapping[str, float]) -> dict[str, float]:
    """`<role>: <statement>` counts summed by role."""
    found: dict[str, float] = {}
    for key, count in statements.items():
        role = key.split(":", 1)[0]
        found[role] = found.get(role, 0.0) + count
    return found


def by_client(connections: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """`/connz` counters summed by the NATS user of each connection (every service logs in as
    its own, and may hold several connections), else by connection name."""
    found: dict[str, dict[str, int]] = {}
    for conn in connections:
        key = str(conn.get("authorized_user") or conn.get("name") or "?")
        into = found.setdefault(key, dict.fromkeys(BUS_COUNTERS, 0))
        for key in BUS_COUNTERS:
            into[key] += int(conn.get(key, 0))
    return found


def consumer_services() -> dict[str, str]:
    """durable consumer -> the service that declares it."""
    return {c.name: s.name for s in catalog.SERVICES for c in s.consumers()}


# --- reading the counters (IO) ----------------------------------------------------------------


def machine_times() -> dict[str, int]:
    """The machine's CPU time by kind so far (clock ticks), empty where `/proc` is missing."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return {}
    if not fields or fields[0] != "cpu":
        return {}
    return {k: int(v) for k, v in zip(MACHINE_FIELDS, fields[1:], strict=False)}


async def enable_statement_stats(stack: Stack) -> None:
    """Preload `pg_stat_statements` in a stack's PostgreSQL before `stack.start()` (one extra
    start and stop of the server; the setting lives in the data dir's postgresql.auto.conf)."""
    stack.postgres.start()
    try:
        conn = await asyncpg.connect(stack.database_url)
        try:
            await conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        finally:
            await conn.close()
    finally:
        stack.postgres.stop()


class Meter:
    """Reads a running stack's counters; `open` before the load, `close` after."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.conn: asyncpg.Connection | None = None
        self.statements = False

    async def open(self) -> None:
        self.conn = await asyncpg.connect(self.stack.database_url)
        with contextlib.suppress(asyncpg.PostgresError):
            await self.conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            await self.conn.fetchval("SELECT count(*) FROM pg_stat_statements")
            self.statements = True

    async def close(self) -> None:
        if self.conn is not None:
            await self.conn.close()

    async def read(self) -> Counters:
        at = time.monotonic()
        cpu = self.stack.cpu()
        bus, clients = await self._bus()
        return Counters(
            at,
            cpu,
            await self._streams(),
            bus,
            clients,
            await self._database(),
            await self._statements(),
            machine_times(),
        )

    async def _streams(self) -> dict[str, tuple[int, int]]:
        found = {}
        for info in await self.stack.js.streams_info():
            found[info.config.name or "?"] = (int(info.state.messages), int(info.state.bytes))
        return found

    async def _bus(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """Server totals, and each connection name's (the services name theirs)."""
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            async with httpx.AsyncClient(timeout=3) as client:
                url = self.stack.nats.monitor_url
                varz = (await client.get(f"{url}/varz")).json()
                connz = (await client.get(f"{url}/connz", params={"limit": 4096, "auth": 1})).json()
            return {k: int(varz[k]) for k in BUS_COUNTERS}, by_client(connz["connections"])
        return {}, {}

    async def _database(self) -> dict[str, int]:
        assert self.conn is not None
        db = await self.conn.fetchrow(
            f"SELECT {', '.join(PG_COUNTERS)} FROM pg_stat_database"
            " WHERE datname = current_database()"
        )
        wal = await self.conn.fetchrow("SELECT wal_records FROM pg_stat_wal")
        # WAL bytes from the insert position, which is exact at once; backends report their
        # `pg_stat_wal` counts when they flush their statistics, up to seconds later.
        written = await self.conn.fetchval(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint"
        )
        found = {k: int(db[k]) for k in PG_COUNTERS} if db else {}
        found.update({"wal_records": int(wal["wal_records"])} if wal else {})
        found.update({"wal_bytes": int(written)} if written is not None else {})
        return found | await self._wal_io()

    async def _wal_io(self) -> dict[str, int]:
        """WAL writes and fsyncs: `pg_stat_io` from PostgreSQL 18 on, `pg_stat_wal` before."""
        assert self.conn is not None
        try:
            row = await self.conn.fetchrow(
                "SELECT coalesce(sum(writes), 0)::bigint AS wal_write,"
                " coalesce(sum(fsyncs), 0)::bigint AS wal_sync FROM pg_stat_io"
                " WHERE object = 'wal'"
            )
        except asyncpg.PostgresError:  # before 18: no WAL rows in pg_stat_io
            row = await self.conn.fetchrow("SELECT wal_write, wal_sync FROM pg_stat_wal")
        return {"wal_write": int(row["wal_write"]), "wal_sync": int(row["wal_sync"])} if row else {}

    async def _statements(self) -> dict[str, int] | None:
        if not self.statements:
            return None
        assert self.conn is not None
        rows = await self.conn.fetch(
            "SELECT r.rolname, s.query, s.calls FROM pg_stat_statements s"
            " JOIN pg_roles r ON r.oid = s.userid WHERE r.rolname <> current_user"
        )
        found: dict[str, int] = {}
        for row in rows:
            key = f"{row['rolname']}: {' '.join(row['query'].split())}"[:STATEMENT_CHARS]
            found[key] = found.get(key, 0) + int(row["calls"])
        return found
