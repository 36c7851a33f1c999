"""`tavern sessions`: the sessions read model as a table (binding, turns, tokens, activity,
chats that need repair)."""

from __future__ import annotations

import argparse
import asyncio
from datetime import UTC, datetime
from typing import Any

from rich.console import Console
from rich.table import Column, Table

from tavern_cli import identity, initialise
from tavern_cli.commands.replay import add_server_options, connections
from tavern_cli.failure import fail
from tavern_projector.operator import queries
from tavern_runtime.errors import TavernError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--limit", type=int, default=50, help="most recently active first")
    add_server_options(parser)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    initialise.quiet_logging()
    try:
        rows = asyncio.run(_rows(args))
    except TavernError as exc:
        return fail("sessions", exc.message)
    Console().print(render(rows, datetime.now(UTC)))
    return 0


async def _rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    async with connections(args, needs_nats=False) as (pool, _):
        # a named user sees their own sessions; the operator sees everyone's
        owner = identity.principal().user
        found = await queries.sessions_list(pool, {"limit": args.limit}, owner)
    rows: list[dict[str, Any]] = found["sessions"]
    return rows


def render(rows: list[dict[str, Any]], now: datetime) -> Table:
    widest = max((len(row["session_id"]) for row in rows), default=7)
    table = Table(
        Column("session", no_wrap=True, min_width=widest),  # an id is never cut
        "binding",
        "character",
        "turns",
        "outcomes",
        "tokens",
        "last activity",
        "chat",
        title="Sessions",
        title_justify="left",
    )
    for row in rows:
        table.add_row(
            row["session_id"],
            _binding(row),
            row["character_id"] or "[dim]-[/dim]",
            str(row["turns"]) + (" [yellow]+1 open[/yellow]" if row["open_turn"] else ""),
            f"{row['turns_completed']}✓ {row['turns_cancelled']}✗ {row['turns_failed']}!",
            f"{row['prompt_tokens']:,} in / {row['completion_tokens']:,} out",
            _ago(row["last_activity"], now),
            _chat(row),
        )
    if not rows:
        table.add_row("[dim]no sessions yet[/dim]", *[""] * 7)
    return table


def _chat(row: dict[str, Any]) -> str:
    """The chat file, and whether it waits for repair or was edited outside (kept as edited;
    the session log keeps the lines as they were)."""
    if row["needs_repair"]:
        return "[red]needs repair[/red]"
    key = row["chat_key"] or ""
    if row.get("edited_outside_at"):
        return f"{key} [yellow]edited outside, kept[/yellow]"
    return key


def _binding(row: dict[str, Any]) -> str:
    mode = f" / {row['context_mode']}" if row["context_mode"] else ""
    return f"{row['architecture'] or '?'}{mode}"


def _ago(value: str | None, now: datetime) -> str:
    if not value:
        return ""
    seconds = int((now - datetime.fromisoformat(value)).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{max(seconds, 0)}s ago"
