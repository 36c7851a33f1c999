"""The demo conversation `tavern up` plays: a few turns through the whole running system."""

from __future__ import annotations

import asyncio
import io
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from tavern_cli import identity
from tavern_cli.conversation import Conversation, Renderer
from tavern_events.ids import new_id
from tavern_runtime.auth import Credentials, connect_signed
from tavern_runtime.bus import login_options

SCRIPT: tuple[str, ...] = (
    "Hello! I'm Ada, and I sail a small boat called Nautilus on weekends.",
    "remember that my boat Nautilus is a blue 19-foot sloop",
    "What do you remember about Nautilus?",
    "/compact",
)


DEMO_SESSION = "demo"
"""The one session `tavern up` plays the demo in: played once per data dir, then continued."""


@dataclass(frozen=True)
class DemoResult:
    session_id: str
    turns: int
    outcomes: tuple[str, ...]


async def play(
    nats_url: str,
    out: TextIO | None = None,
    colour: bool | None = None,
    prefix: str = "",
    turn_timeout: float = 60.0,
    *,
    user: str = "",
    password: str = "",
    credentials: Credentials | None = None,
    session_id: str | None = None,
) -> DemoResult:
    """Play SCRIPT on `session_id` (default: a new session), as the CLI's principal (the local
    operator by default); every line is rendered as the session log records it. It logs in as
    `user` (or as the user in the URL), with that user's inbox prefix."""
    login = login_options(user, password, nats_url)
    signer = credentials or identity.credentials()
    nc = await connect_signed(nats_url, signer, identity.principal(), name="tavern-demo", **login)
    session_id = session_id or f"demo-{new_id()[-12:]}"
    renderer = (
        Renderer(out, colour, prefix) if out is not None else Renderer(colour=colour, prefix=prefix)
    )
    chat = Conversation(nc, session_id, renderer)
    outcomes: list[str] = []
    try:
        await chat.open()
        renderer._line(
            f"demo session {session_id} (offline stand-in model unless TAVERN_LLM_BASE_URL is set)"
        )
        for line in SCRIPT:
            if line.startswith("/"):
                renderer._line(f"you: {line}")
                await chat.command(line[1:])
            else:
                await chat.send(line)
            ended = await chat.wait_turn(turn_timeout)
            outcomes.append(str(ended.payload.outcome))
            await asyncio.sleep(0)
    finally:
        await chat.close()
        await nc.close()
    return DemoResult(session_id, len(outcomes), tuple(outcomes))


READY_TIMEOUT_S = 90.0


async def played_before(
    nats_url: str, user: str = "", password: str = "", credentials: Credentials | None = None
) -> bool:
    """Whether the demo session has a log already: each `tavern up` reuses it, so demo
    sessions never pile up."""
    login = login_options(user, password, nats_url)
    signer = credentials or identity.credentials()
    nc = await connect_signed(nats_url, signer, identity.principal(), name="tavern-demo", **login)
    try:
        return await Conversation(nc, DEMO_SESSION, Renderer(io.StringIO())).exists()
    finally:
        await nc.close()


async def run_in_up(nats_url: str, data_dir: Path, user: str = "", password: str = "") -> None:
    """The demo as `tavern up` plays it: once every service is ready, on stdout."""
    from tavern_cli.probes import all_ready
    from tavern_cli.rundir import Layout, gateway_url
    from tavern_runtime.settings import TavernSettings

    layout = Layout(data_dir)
    deadline = asyncio.get_running_loop().time() + READY_TIMEOUT_S
    while not await all_ready(layout):
        if asyncio.get_running_loop().time() > deadline:
            print("demo: services not ready; skipping the demo (see `tavern status`)", flush=True)
            return
        await asyncio.sleep(0.5)
    print("\n--- demo conversation " + "-" * 50, flush=True)
    try:
        credentials = Credentials.of(TavernSettings(data_dir=data_dir))
        if await played_before(nats_url, user, password, credentials):
            print(
                f"the demo played before in session {DEMO_SESSION}: continue it with "
                f"`./tavern chat --session {DEMO_SESSION}`; Ctrl-C stops everything.",
                flush=True,
            )
            return
        result = await play(
            nats_url,
            user=user,
            password=password,
            credentials=credentials,
            session_id=DEMO_SESSION,
        )
    except (TimeoutError, OSError) as exc:
        print(f"demo: stopped early ({type(exc).__name__}: {exc})", flush=True)
        return
    print(
        f"--- demo finished: {result.turns} turns ({', '.join(result.outcomes)}). Continue it "
        f"with `./tavern chat --session {result.session_id}`; Ctrl-C stops everything.",
        flush=True,
    )
    url = gateway_url(layout)
    if url:
        print(
            f"open {url} : the demo conversation is there, under the owner account",
            flush=True,
        )
