"""`tavern repair`: rebuild from the session log every chat marked "needs repair" (or the
sessions given), with its history index and session row. Safe while the system runs."""

from __future__ import annotations

import argparse
import asyncio

from rich.console import Console
from rich.table import Table

from tavern_cli import initialise
from tavern_cli.commands.replay import (
    add_server_options,
    connections,
    progress_bar,
    projector_settings,
)
from tavern_cli.failure import fail
from tavern_projector.operator import catalog, operations, options_of
from tavern_runtime.errors import TavernError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sessions", nargs="*", help="sessions to rebuild (default: those marked)")
    parser.add_argument("--from-archive", action="store_true", help="read Postgres, not NATS")
    parser.add_argument("--list", action="store_true", help="only list what needs repair")
    add_server_options(parser)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    initialise.quiet_logging()
    try:
        return asyncio.run(_repair(args))
    except TavernError as exc:
        return fail("repair", exc.message)


async def _repair(args: argparse.Namespace) -> int:
    console = Console()
    async with connections(args, needs_nats=not args.from_archive) as (pool, js):
        marked = await operations.needing_repair(pool)
        if args.list or not (args.sessions or marked):
            console.print(_table(marked) if marked else "[green]nothing needs repair[/green]")
            return 0
        chosen = list(args.sessions) or [row["session_id"] for row in marked]
        options = options_of(projector_settings())
        projection = catalog.build("chat", options)
        total = await operations.total(
            pool, js, projection, operations.plan("chat", from_archive=args.from_archive), chosen
        )
        with progress_bar(console, "repair", total * len(operations.REPAIRED)) as advance:
            await operations.repair(
                pool, js, options, chosen, advance, from_archive=args.from_archive
            )
    console.print(f"[green]repaired {len(chosen)} session(s)[/green]: {', '.join(chosen)}")
    return 0


def _table(rows: list[dict[str, object]]) -> Table:
    table = Table("session", "chat", "failed at seq", "error", title="Chats needing repair")
    table.title_justify = "left"
    for row in rows:
        error = str(row["error"] or "")
        table.add_row(
            str(row["session_id"]), str(row["chat_key"]), str(row["failed_seq"]), error[:80]
        )
    return table
