"""Entry point of the `tavern` command: one sub-command per module under `tavern_cli.commands`.

Whatever a command does not handle itself ends here as one line on stderr and a non-zero exit,
never a traceback (`TAVERN_DEBUG=1` shows it).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from tavern_cli import identity
from tavern_cli.commands import REGISTRY
from tavern_cli.failure import fail
from tavern_runtime.errors import TavernError

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
    sys.exit(guarded(args.command, lambda: runner(args, extra)))


def guarded(command: str, body: Callable[[], int]) -> int:
    """Run a command; an error it let through becomes one line and exit code 1 (130: Ctrl-C)."""
    try:
        return body()
    except KeyboardInterrupt:
        return 130
    except TavernError as exc:
        return fail(command, exc.message)
    except UnicodeDecodeError as exc:
        return fail(command, f"not UTF-8 text (byte {exc.start}): {exc.reason}")
    except OSError as exc:
        where = f" {exc.filename}" if exc.filename else ""
        return fail(command, f"{exc.strerror or type(exc).__name__}:{where}".rstrip(":"))
    except Exception as exc:  # the last resort: a bug, said in one line
        if os.environ.get("TAVERN_DEBUG"):
            traceback.print_exc()
        return fail(
            command,
            f"unexpected {type(exc).__name__}: {exc} (TAVERN_DEBUG=1 shows the traceback)",
        )
