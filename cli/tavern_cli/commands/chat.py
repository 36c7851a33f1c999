"""`tavern chat`: a terminal conversation with a session, rendered live from its log.

`tavern chat` starts a new session; `tavern chat --session ID` joins one that exists (a typo is
an error, not an empty chat); `tavern chat --session ID --new` starts one with that id.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import Any

from tavern_cli.conversation import Conversation, Renderer
from tavern_cli.endpoints import nats_connection, resolve
from tavern_cli.failure import fail
from tavern_cli.rundir import Layout, data_dir_from_env
from tavern_events.ids import new_id
from tavern_events.subjects import InvalidIdError
from tavern_runtime import tracing
from tavern_runtime.errors import TavernError

HELP = (
    "commands: /cancel (stop the current turn), /compact (no arguments), "
    "/mode dsh-native|agent-managed, /swipe, /regenerate (st sessions), /speak NAME, "
    "/member add|remove|mute|unmute CHARACTER (group chats), /quit"
)
SIMPLE = ("/compact", "/swipe", "/regenerate")
PROMPT = "you> "
MEMBER_ACTIONS = ("add", "remove", "mute", "unmute")


def slash_command(text: str) -> tuple[str, dict[str, Any]] | None:
    """The command a chat line asks for (name, args), or None when it is not one we know."""
    if text in SIMPLE:
        return text[1:], {}
    word, _, rest = text.partition(" ")
    rest = rest.strip()
    if word == "/mode" and rest:
        return "mode", {"context_mode": rest}
    if word == "/speak" and rest:
        return "speak", {"name": rest}
    action, _, character = rest.partition(" ")
    if word == "/member" and action in MEMBER_ACTIONS and character.strip():
        return "member", {"action": action, "character_id": character.strip()}
    return None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--session", help="the session to join (default: a new session)")
    parser.add_argument(
        "--new",
        action="store_true",
        help="start the --session given (it must not exist yet)",
    )
    parser.add_argument("--nats-url", help="NATS server (default: the running `tavern up`)")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    tracing.configure_tracing("cli", os.environ.get("TAVERN_OTLP_ENDPOINT", ""))
    try:
        return asyncio.run(_chat(args))
    except KeyboardInterrupt:
        return 130
    except (TavernError, InvalidIdError) as exc:
        return fail("chat", getattr(exc, "message", str(exc)))
    finally:
        tracing.shutdown_tracing()


class UnknownSession(TavernError):
    code = "not_found"


async def _chat(args: argparse.Namespace) -> int:
    endpoints = resolve(Layout(data_dir_from_env()), nats_url=args.nats_url)
    session_id = args.session or f"chat-{new_id()[-12:]}"
    renderer = Renderer(prompt=PROMPT)
    async with nats_connection(endpoints) as nc:
        chat = Conversation(nc, session_id, renderer)
        if args.session:
            await _check_exists(chat, new=bool(args.new))
        await chat.open()
        print(f"session {session_id} — {HELP}")
        try:
            await _repl(chat, renderer)
        finally:
            await chat.close()
    return 0


async def _check_exists(chat: Conversation, *, new: bool) -> None:
    found = await chat.exists()
    if new and found:
        raise UnknownSession(f"session {chat.session_id} already exists; drop --new to join it")
    if not new and not found:
        raise UnknownSession(
            f"no session {chat.session_id} (`tavern sessions` lists them); "
            f"`tavern chat --session {chat.session_id} --new` starts one with this id"
        )


async def _repl(chat: Conversation, renderer: Renderer) -> None:
    loop = asyncio.get_running_loop()
    renderer.show_prompt()
    while True:
        line = await loop.run_in_executor(None, sys.stdin.readline)
        renderer.prompt_answered()
        if not line:
            return
        text = line.strip()
        if not text:
            renderer.show_prompt()
            continue
        if text == "/quit":
            return
        if text == "/cancel":
            await chat.cancel()
        elif (asked := slash_command(text)) is not None:
            await chat.command(*asked)
        elif text.startswith("/"):
            print(HELP)
            renderer.show_prompt()
        else:
            await chat.send(text)
        # otherwise the prompt returns when the turn has ended (the renderer shows it)
