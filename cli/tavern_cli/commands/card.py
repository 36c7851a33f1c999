"""`tavern card import FILE`: import a character card (JSON V1/V2/V3 or PNG), a lorebook
(world info JSON) or a persona. The file is validated completely first; a bad field is named
and nothing is published."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.console import Console

from tavern_cli import initialise
from tavern_cli.commands.replay import add_server_options, endpoints_of
from tavern_cli.endpoints import nats_connection
from tavern_cli.rundir import data_dir_from_env
from tavern_projector import importer
from tavern_projector.domain.cards import ImportedAsset
from tavern_runtime.errors import TavernError


def configure(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="card_command", metavar="ACTION", required=True)
    imports = sub.add_parser("import", help="import a card, lorebook or persona file")
    imports.add_argument("file", type=Path)
    imports.add_argument("--kind", choices=("character", "lorebook", "persona"))
    imports.add_argument("--check", action="store_true", help="validate only; publish nothing")
    add_server_options(imports)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    initialise.quiet_logging()
    console = Console()
    try:
        asset = importer.read_asset(args.file, args.kind)
        if args.check:
            console.print(f"[green]valid[/green] {_describe(asset)}")
            return 0
        published = asyncio.run(_publish(args))
    except FileNotFoundError:
        console.print(f"[red]tavern card: no such file {args.file}[/red]")
        return 1
    except TavernError as exc:
        console.print(f"[red]tavern card: {args.file.name} refused: {exc.message}[/red]")
        return 1
    verb = "already imported" if published.duplicate else "imported"
    console.print(
        f"[green]{verb}[/green] {_describe(published.asset)} (ASSETS seq {published.stream_seq})"
    )
    return 0


async def _publish(args: argparse.Namespace) -> importer.Published:
    async with nats_connection(endpoints_of(args)) as nc:
        return await importer.import_file(
            nc.jetstream(timeout=10), args.file, data_dir_from_env(), args.kind
        )


def _describe(asset: ImportedAsset) -> str:
    origin = f"{asset.source_format}, sha256 {asset.content_hash[:12]}"
    return f"{asset.kind} {asset.name!r} as {asset.asset_id} ({origin})"
