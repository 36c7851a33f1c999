"""Entry point of the `tavern` command: one sub-command per module under `tavern_cli.commands`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tavern_cli import identity
from tavern_cli.commands import REGISTRY

NO_PRINCIPAL = ("test", "docs")
"""Commands that talk to no service, so `--user` means nothing to them (`test` passes its
arguments on to pytest)."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tavern", description="AgentTavern: event-sourced agent runtime with governed memory."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (help_text, configure, _run) in REGISTRY.items():
        command = sub.add_parser(name, help=help_text, description=help_text)
        configure(command)
        if name not in NO_PRINCIPAL:
            identity.add_option(command)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    parser = build_parser()
    given = list(sys.argv[1:] if argv is None else argv)
    user, given = identity.take_option(given, NO_PRINCIPAL)
    args, extra = parser.parse_known_args(given)
    if args.command is None:
        parser.print_help()
        sys.exit(2)
    _help, _configure, run = REGISTRY[args.command]
    if extra and not getattr(args, "accepts_extra", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    identity.act_as(user or getattr(args, "user", None))
    runner: Callable[[argparse.Namespace, list[str]], int] = run
    sys.exit(runner(args, extra))
