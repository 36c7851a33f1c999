"""`tavern card import FILE`: import a character card (JSON V1/V2/V3, PNG or CHARX), a
lorebook (world info JSON), a persona or a SillyTavern persona backup. The file is validated
completely first; a bad field is named and nothing is published. A card already imported (the
same content from the same source format) is reported as such and not published again. The
asset belongs to the user the CLI acts as (`--user NAME`; the operator's belong to `local`)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from rich.console import Console

from tavern_cli import identity, initialise
from tavern_cli.commands.replay import add_server_options, endpoints_of
from tavern_cli.endpoints import nats_connection
from tavern_cli.failure import fail
from tavern_cli.rundir import data_dir_from_env
from tavern_runtime.cards import cards, importer
from tavern_runtime.cards.cards import ImportedAsset
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
    if args.file.is_dir():
        return fail(
            "card",
            f"{args.file} is a folder; `tavern card import` takes one file "
            "(`tavern st import FOLDER` imports a SillyTavern data folder)",
        )
    try:
        owner = identity.principal().owner
        assets = [cards.owned_by(a, owner) for a in importer.read_assets(args.file, args.kind)]
        if args.check:
            for asset in assets:
                console.print(f"[green]valid[/green] {_describe(asset)}")
            return 0
        found = asyncio.run(_publish(args))
    except FileNotFoundError:
        return fail("card", f"no such file {args.file}")
    except TavernError as exc:
        return fail("card", f"{args.file.name} refused: {exc.message}")
    for published in found:
        verb = "already imported" if published.duplicate else "imported"
        console.print(
            f"[green]{verb}[/green] {_describe(published.asset)} "
            f"(ASSETS seq {published.stream_seq})"
        )
    return 0


async def _publish(args: argparse.Namespace) -> list[importer.Published]:
    async with nats_connection(endpoints_of(args)) as nc:
        return await importer.import_all(
            nc.jetstream(timeout=10),
            args.file,
            data_dir_from_env(),
            args.kind,
            identity.principal().owner,
        )


def _describe(asset: ImportedAsset) -> str:
    origin = f"{asset.source_format}, sha256 {asset.content_hash[:12]}"
    return f"{asset.kind} {asset.name!r} as {asset.asset_id} ({origin})"
