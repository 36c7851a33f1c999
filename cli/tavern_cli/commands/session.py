"""`tavern session new`: create a session with an explicit binding (architecture, context mode,
character, persona), as the first input of the session: a `create` command the loop applies."""

from __future__ import annotations

import argparse
import asyncio
import io
from typing import Any

from rich.console import Console

from tavern_cli.conversation import Conversation, Renderer
from tavern_cli.endpoints import nats_connection, resolve
from tavern_cli.failure import fail
from tavern_cli.rundir import Layout, data_dir_from_env
from tavern_events.envelope import SessionEvent
from tavern_events.ids import new_id
from tavern_events.subjects import InvalidIdError, validate_id
from tavern_runtime.errors import TavernError

WAIT_S = 30.0


def configure(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    new = actions.add_parser("new", help="create a session bound to a character and profile")
    new.add_argument("--session", help="the new session's id (default: a fresh one)")
    new.add_argument("--architecture", choices=["agent-tavern", "st"], help="default: config")
    new.add_argument("--context-mode", choices=["dsh-native", "agent-managed"])
    new.add_argument("--character", help="character id (as `tavern card` imported it)")
    new.add_argument("--persona", help="persona id")
    new.add_argument("--chat", help="the chat it continues (default: a chat of its own)")
    new.add_argument(
        "--memory-reach",
        choices=["chat", "character", "agent"],
        help="what it remembers: this chat only (private), every chat with the character "
        "(default), or every chat of the agent",
    )
    add_wait_options(new)


def add_wait_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nats-url", help="NATS server (default: the running `tavern up`)")
    parser.add_argument("--wait", type=float, default=WAIT_S, help="seconds to wait for the loop")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    session_id = args.session or f"s-{new_id()[-12:].lower()}"
    create = _create_args(args)
    return report(args, session_id, "create", create, lambda ended: f"session {session_id}")


def _create_args(args: argparse.Namespace) -> dict[str, Any]:
    given = {
        "architecture": args.architecture,
        "context_mode": args.context_mode,
        "character_id": args.character,
        "persona_id": args.persona,
        "chat_id": args.chat,
        "memory_reach": args.memory_reach,
    }
    return {k: v for k, v in given.items() if v is not None}


def report(
    args: argparse.Namespace,
    session_id: str,
    name: str,
    command_args: dict[str, Any],
    describe: Any,
) -> int:
    """Send one command, wait for its turn to end, print what happened (1 if refused)."""
    try:
        validate_id(session_id, what="session id")
        ended = asyncio.run(command_turn(args, session_id, name, command_args))
    except (TavernError, InvalidIdError) as exc:
        return fail("", getattr(exc, "message", str(exc)))
    except TimeoutError:
        return fail("", f"no loop answered within {args.wait:.0f}s; is it running?")
    payload = ended.payload
    if payload.outcome != "completed":
        return fail("", f"refused: {payload.reason}")
    Console().print(f"{describe(ended)}: {payload.reason}")
    return 0


async def command_turn(
    args: argparse.Namespace, session_id: str, name: str, command_args: dict[str, Any]
) -> SessionEvent:
    """The turn/end of the turn that ran the command."""
    endpoints = resolve(Layout(data_dir_from_env()), nats_url=args.nats_url)
    async with nats_connection(endpoints) as nc:
        chat = Conversation(nc, session_id, Renderer(io.StringIO()))
        await chat.open()
        try:
            await chat.command(name, command_args)
            return await chat.wait_turn(args.wait)
        finally:
            await chat.close()
