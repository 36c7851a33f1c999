"""`tavern fork SESSION`: a new session forked from SESSION at its last turn boundary, with the
same character and persona and, if asked, another architecture or context mode. The child's
`session/created` names its parent and the fork point; the parent records `session/forked`; the
parent's chat stays searchable from the child (`tavern_history_search` follows parents)."""

from __future__ import annotations

import argparse
from typing import Any

from tavern_cli.commands.session import add_wait_options, report
from tavern_events.ids import new_id


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session", help="the session to fork")
    parser.add_argument("--architecture", choices=["agent-tavern", "st"], help="default: same")
    parser.add_argument("--context-mode", choices=["dsh-native", "agent-managed"])
    parser.add_argument("--into", help="the child's session id (default: a fresh one)")
    add_wait_options(parser)


def run(args: argparse.Namespace, extra: list[str]) -> int:
    child = args.into or f"{args.session[:40]}-fk{new_id()[-8:].lower()}"
    given = {
        "session_id": child,
        "architecture": args.architecture,
        "context_mode": args.context_mode,
    }
    fork_args: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    return report(args, args.session, "fork", fork_args, lambda ended: f"{args.session} -> {child}")
