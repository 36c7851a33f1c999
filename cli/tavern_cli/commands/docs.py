"""`tavern docs`: regenerate the AsyncAPI documents under docs/asyncapi (or `--check` them)."""

from __future__ import annotations

import argparse
from pathlib import Path

from tavern_cli import asyncapi


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="exit 1 if a document is stale")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    root = Path.cwd()
    if args.check:
        stale = asyncapi.stale(root)
        for name in stale:
            print(f"stale: docs/asyncapi/{name} (run `tavern docs`)")
        return 1 if stale else 0
    for path in asyncapi.write(root):
        print(f"wrote {path.relative_to(root)}")
    return 0
