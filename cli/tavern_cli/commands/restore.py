"""`tavern restore`: rebuild a lost or emptied SESSIONS stream from the projector's archive
(same ids, same order, conditional appends), then recreate the durable consumers on it.

The stream must be missing or empty: delete a damaged stream first (`--delete-damaged`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib

from nats.js.errors import NotFoundError
from rich.console import Console

from tavern_cli import initialise
from tavern_cli.commands.replay import (
    add_server_options,
    connections,
    endpoints_of,
    progress_bar,
)
from tavern_cli.endpoints import nats_connection
from tavern_cli.failure import fail
from tavern_events.streams import SESSIONS
from tavern_projector.operator import restore
from tavern_runtime.errors import TavernError
from tavern_runtime.settings import TavernSettings


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--delete-damaged",
        action="store_true",
        help="delete the SESSIONS stream first (its messages are lost unless archived)",
    )
    parser.add_argument("--yes", action="store_true", help="do not ask before deleting")
    add_server_options(parser)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    initialise.quiet_logging()
    try:
        return asyncio.run(_restore(args))
    except TavernError as exc:
        return fail("restore", exc.message)


async def _restore(args: argparse.Namespace) -> int:
    console = Console()
    endpoints = endpoints_of(args)
    replicas = TavernSettings().stream_replicas
    async with connections(args, needs_nats=False) as (pool, _), nats_connection(endpoints) as nc:
        js = nc.jetstream(timeout=10)
        summary = await restore.archive_summary(pool)
        console.print(
            f"archive: {summary['events']} events of {summary['sessions']} sessions, "
            f"up to stream seq {summary['last_seq']} ({summary['redacted']} redacted)"
        )
        if args.delete_damaged and not await _delete(js, console, args.yes):
            return 1
        with progress_bar(console, "restore SESSIONS", int(summary["events"] or 0)) as advance:
            report = await restore.restore(pool, js, advance, replicas=replicas)
        provisioned = await initialise.provision_all(nc, replicas, False)
    console.print(
        f"[green]restored {report.events} events of {len(report.sessions)} sessions[/green]"
    )
    for line in provisioned.lines():
        if line.startswith("created"):
            console.print(f"  {line}")
    if report.moved:
        console.print(
            f"[yellow]{len(report.moved)} events landed at new stream sequences: "
            "run `tavern replay` for every projection[/yellow]"
        )
    return 0


async def _delete(js: object, console: Console, yes: bool) -> bool:
    if not yes and console.input(f"delete the {SESSIONS.name} stream? [y/N] ").lower() != "y":
        return False
    with contextlib.suppress(NotFoundError):
        await js.delete_stream(SESSIONS.name)  # type: ignore[attr-defined]
    return True
