"""`tavern status`: servers, streams, consumers and services, green or not.

Exit code 0 only when everything is green. Works against a running `tavern up` (found through
the data dir) and against external servers given by `TAVERN_NATS_URL` / `TAVERN_DATABASE_URL`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from tavern_cli import probes
from tavern_cli.endpoints import Endpoints, nats_connection, resolve
from tavern_cli.rundir import Layout, data_dir_from_env
from tavern_runtime.errors import ConfigurationError

GREEN, RED = "[green]●[/green]", "[red]●[/red]"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nats-url", help="NATS servers (default: env, then `tavern up`)")
    parser.add_argument("--database-url", help="Postgres DSN (default: env, then `tavern up`)")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    layout = Layout(data_dir_from_env())
    endpoints = resolve(layout, args.nats_url, args.database_url)
    if not endpoints.nats_url and not endpoints.database_url:
        print(f"tavern status: {endpoints.nothing_running().message}", file=sys.stderr)
        return 1
    report = asyncio.run(gather(layout, endpoints))
    console = Console()
    console.print(f"[dim]servers from {endpoints.source}[/dim]")
    for table in render(report):
        console.print(table)
    console.print("[green]all green[/green]" if report.ok else "[red]not all green[/red]")
    return 0 if report.ok else 1


@dataclass
class Report:
    servers: list[probes.Check]
    nats: probes.NatsState | None
    services: list[probes.ServiceRow]

    @property
    def ok(self) -> bool:
        streams = self.nats.streams if self.nats else []
        consumers = self.nats.consumers if self.nats else []
        rows_ok = [c.ok for c in self.servers] + [s.ok for s in streams]
        rows_ok += [c.ok for c in consumers]
        return all(rows_ok + [s.ok for s in self.services])


async def gather(layout: Layout, endpoints: Endpoints) -> Report:
    postgres = await probes.probe_postgres(endpoints.database_url)
    try:
        async with nats_connection(endpoints) as nc:
            nats = await probes.probe_nats(nc)
            services = await probes.probe_services(layout, nc)
    except ConfigurationError as exc:
        down = probes.Check("NATS", False, exc.message)
        return Report([down, postgres], None, await probes.probe_services(layout, None))
    return Report([nats.server, postgres], nats, services)


def render(report: Report) -> list[Table]:
    tables = [_servers(report.servers)]
    if report.nats is not None:
        tables += [_streams(report.nats.streams), _consumers(report.nats.consumers)]
    tables.append(_services(report.services))
    return tables


def _servers(rows: list[probes.Check]) -> Table:
    table = Table("", "server", "detail", title="Servers", title_justify="left")
    for row in rows:
        table.add_row(GREEN if row.ok else RED, row.name, row.detail)
    return table


def _streams(rows: list[probes.StreamRow]) -> Table:
    table = Table("", "stream", "messages", "bytes", "consumers", "note", title="Streams")
    table.title_justify = "left"
    for row in rows:
        numbers = (str(row.messages), _size(row.bytes), str(row.consumers)) if row.ok else ("",) * 3
        table.add_row(GREEN if row.ok else RED, row.name, *numbers, row.detail)
    return table


def _consumers(rows: list[probes.ConsumerRow]) -> Table:
    columns = ("stream", "consumer", "pending", "ack pending", "redelivered", "waiting", "note")
    table = Table("", *columns)
    table.title, table.title_justify = "Consumers", "left"
    for row in rows:
        counts = (row.pending, row.ack_pending, row.redelivered, row.waiting)
        mark = GREEN if row.ok else RED
        table.add_row(mark, row.stream, row.name, *(str(n) for n in counts), row.detail)
    if not rows:
        table.add_row("", "[dim]none yet[/dim]", "", "", "", "", "", "")
    return table


def _services(rows: list[probes.ServiceRow]) -> Table:
    table = Table("", "service", "ping (bus)", "readiness", title="Services", title_justify="left")
    for row in rows:
        table.add_row(GREEN if row.ok else RED, row.name, row.ping, row.ready)
    return table


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
