"""`tavern dream`: offline consolidation of observations into the candidate pool, through
`tavern.rpc.consolidator.*`. A dry run by default: it writes nothing.

    tavern dream [--scope S] [--apply]
    tavern dream review --list [--scope S] [--domain D]
    tavern dream review --approve ID [ID ...] | --reject ID [ID ...]

`--apply` writes only the candidate pool and the run ledger (never an observation); approvals
and rejections are kept by every later run.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TextIO

from nats.aio.client import Client

from tavern_cli.endpoints import nats_connection, resolve
from tavern_cli.rundir import Layout, data_dir_from_env
from tavern_events import subjects
from tavern_events.replies import timeout_headers
from tavern_runtime.errors import ConfigurationError

TIMEOUT_S = 120.0


class ConsolidatorRefused(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.error = error


class ConsolidatorClient:
    """Request/reply to the consolidator; an `{"error": ...}` reply raises."""

    def __init__(self, nc: Client, actor: str) -> None:
        self._nc, self._actor = nc, actor

    async def call(self, operation: str, /, **body: Any) -> dict[str, Any]:
        payload = {k: v for k, v in {"actor": self._actor, **body}.items() if v is not None}
        reply = await self._nc.request(
            subjects.rpc("consolidator", operation),
            json.dumps(payload).encode(),
            timeout=TIMEOUT_S,
            headers=timeout_headers(TIMEOUT_S),
        )
        found: dict[str, Any] = json.loads(reply.data)
        if "error" in found:
            raise ConsolidatorRefused(found["error"])
        return found


Perform = Callable[[ConsolidatorClient, argparse.Namespace, TextIO], Awaitable[int]]


def login() -> str:
    try:
        return getpass.getuser() or "user"
    except (KeyError, OSError):
        return "user"


def common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nats-url", help="NATS server (default: env, then `tavern up`)")
    parser.add_argument("--actor", default=login(), help="who you are, for the audit trail")


def configure(parser: argparse.ArgumentParser) -> None:
    common_options(parser)
    parser.add_argument("--scope", help="one scope (a chat id); default: every scope")
    parser.add_argument("--apply", action="store_true", help="write the pool (default: dry run)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    review = actions.add_parser("review", help="list, approve or reject pool candidates")
    review.add_argument("--scope", dest="review_scope")
    review.add_argument("--domain")
    decision = review.add_mutually_exclusive_group(required=True)
    decision.add_argument("--list", action="store_true")
    decision.add_argument("--approve", nargs="+", metavar="ID")
    decision.add_argument("--reject", nargs="+", metavar="ID")


def run_command(args: argparse.Namespace, perform_it: Perform) -> int:
    async def main() -> int:
        endpoints = resolve(Layout(data_dir_from_env()), nats_url=args.nats_url)
        async with nats_connection(endpoints) as nc:
            return await perform_it(ConsolidatorClient(nc, args.actor), args, sys.stdout)

    try:
        return asyncio.run(main())
    except ConfigurationError as exc:
        print(exc.message, file=sys.stderr)
        return 2


def run(args: argparse.Namespace, extra: list[str]) -> int:
    return run_command(args, perform)


async def perform(client: ConsolidatorClient, args: argparse.Namespace, out: TextIO) -> int:
    """Run one `tavern dream` operation, printing JSON."""
    try:
        if args.action == "review":
            op, ids = _review(args)
            reply = await client.call(
                "dream.review", op=op, ids=ids, scope_id=args.review_scope, domain=args.domain
            )
        else:
            reply = await client.call("dream.run", scope_id=args.scope, apply=args.apply)
    except ConsolidatorRefused as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    print_json(out, reply)
    return 0


def _review(args: argparse.Namespace) -> tuple[str, list[str]]:
    if args.approve:
        return "approve", list(args.approve)
    if args.reject:
        return "reject", list(args.reject)
    return "list", []


def print_json(out: TextIO, value: Any) -> None:
    out.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
