"""`tavern st import PATH` brings chats, cards, lorebooks and personas in from SillyTavern;
`tavern st export DIR` writes them out as a SillyTavern user data folder. With `--user NAME`
both act as that user: what is imported is theirs, and the export holds only what is theirs.

    tavern st import ~/SillyTavern/data/default-user          a whole user data folder
    tavern st import ~/SillyTavern/data/default-user/chats/default_Seraphina   one character
    tavern st import "Seraphina - 2026-12-01@21h20m05s.jsonl"  one chat

Safe to run again: what is already imported is reported as skipped and left as it is.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from tavern_cli import identity, initialise
from tavern_cli.commands.replay import (
    add_server_options,
    connections,
    endpoints_of,
    projector_settings,
)
from tavern_cli.endpoints import nats_connection
from tavern_cli.rundir import data_dir_from_env
from tavern_cli.stimport import Importer, Item, Report, discover, line_count
from tavern_projector.operator import Exported, export
from tavern_runtime.chatimport import ChatTarget
from tavern_runtime.errors import TavernError

STYLE = {"imported": "green", "valid": "green", "skipped": "yellow", "refused": "red"}


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="st_command", metavar="ACTION", required=True)
    imports = sub.add_parser(
        "import", help="import a chat file, a character's chats folder or a user data folder"
    )
    imports.add_argument("path", type=Path)
    imports.add_argument(
        "--architecture",
        choices=("agent-tavern", "st"),
        default="st",
        help="how the imported chats continue (default: st, as in SillyTavern)",
    )
    imports.add_argument(
        "--context-mode",
        choices=("dsh-native", "agent-managed"),
        default="dsh-native",
        help="context mode of agent-tavern chats",
    )
    imports.add_argument("--character", help="character id for chats whose card is not imported")
    imports.add_argument(
        "--timezone", help="zone of the chats' send dates (default: the projector's)"
    )
    imports.add_argument("--check", action="store_true", help="validate only; publish nothing")
    add_server_options(imports)
    exports = sub.add_parser(
        "export",
        help="write a SillyTavern user data folder: cards, chats, groups, worlds, personas",
    )
    exports.add_argument("dir", type=Path)
    exports.add_argument("--force", action="store_true", help="write into a non-empty folder")
    add_server_options(exports)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    initialise.quiet_logging()
    if args.st_command == "export":
        return _export(args)
    console = Console()
    try:
        tz = ZoneInfo(args.timezone) if args.timezone else projector_settings().tz
        items = discover(args.path)
        report = asyncio.run(_import(args, items, tz, console))
    except ZoneInfoNotFoundError:
        console.print(f"[red]tavern st: unknown time zone {args.timezone!r}[/red]")
        return 1
    except TavernError as exc:
        console.print(f"[red]tavern st: {exc.message}[/red]")
        return 1
    show(console, report)
    return 1 if report.count("refused") else 0


async def _import(
    args: argparse.Namespace, items: list[Item], tz: ZoneInfo, console: Console
) -> Report:
    target = ChatTarget(
        args.architecture,
        args.context_mode if args.architecture == "agent-tavern" else None,
        args.character,
        owner=identity.principal().owner,
    )
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=True) as progress:
        files = progress.add_task("files", total=len(items))
        lines = progress.add_task("chat lines", total=line_count(items))

        def advance(done_files: int, done_lines: int) -> None:
            progress.advance(files, done_files)
            progress.advance(lines, done_lines)

        importer = Importer(None, data_dir_from_env(), tz, target, advance)
        if args.check:
            return await importer.run(items)
        async with nats_connection(endpoints_of(args)) as nc:
            importer.nc = nc
            return await importer.run(items)


def _export(args: argparse.Namespace) -> int:
    console = Console()
    dest: Path = args.dir
    if dest.exists() and any(dest.iterdir()) and not args.force:
        console.print(f"[red]tavern st: {dest} is not empty; pass --force to write into it[/red]")
        return 1
    try:
        done = asyncio.run(_export_to(args, dest))
    except TavernError as exc:
        console.print(f"[red]tavern st: {exc.message}[/red]")
        return 1
    for note in done.notes:
        console.print(f"[yellow]{escape(note)}[/yellow]")
    console.print(
        f"[green]exported[/green] {done.characters} characters, {done.chats} chats, "
        f"{done.groups} groups, {done.worlds} worlds, {done.personas} personas"
        f" to {escape(str(dest))}"
    )
    return 0


async def _export_to(args: argparse.Namespace, dest: Path) -> Exported:
    settings = projector_settings()
    async with connections(args, needs_nats=False) as (pool, _):
        return await export.export_folder(
            pool, settings.chats_dir, settings.data_dir, dest, owner=identity.principal().user
        )


def show(console: Console, report: Report) -> None:
    """One line per file: `imported  chat      chats/x/y.jsonl: 8 lines as session ...`."""
    for row in report.rows:
        style = STYLE[row.status]
        console.print(
            f"[{style}]{row.status:<8}[/{style}] {row.kind:<9} {escape(row.source)}: "
            f"{escape(row.reason)}",
            soft_wrap=True,
        )
    checked = report.count("valid")
    first = f"{checked} valid" if checked else f"{report.count('imported')} imported"
    console.print(f"{first}, {report.count('skipped')} skipped, {report.count('refused')} refused")
