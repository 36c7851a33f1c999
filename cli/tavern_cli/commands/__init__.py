"""The registration table of `tavern` sub-commands: name -> (help, configure parser, run)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tavern_cli.commands import (
    card,
    chat,
    docs,
    dream,
    fork,
    init,
    ledger,
    repair,
    replay,
    restore,
    rules,
    serve,
    session,
    sessions,
    st,
    status,
    testing,
    up,
)

Configure = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace, list[str]], int]

REGISTRY: dict[str, tuple[str, Configure, Run]] = {
    "up": ("run the whole system here: servers, services, demo", up.configure, up.run),
    "status": ("show servers, streams, consumers and services", status.configure, status.run),
    "init": ("provision streams and migrate schemas on given servers", init.configure, init.run),
    "serve": ("run one service in the foreground, as a container does", serve.configure, serve.run),
    "chat": (
        "talk with a session in the terminal (/cancel, /compact, /mode, /swipe, /quit)",
        chat.configure,
        chat.run,
    ),
    "docs": (
        "regenerate (or --check) the AsyncAPI documents under docs/",
        docs.configure,
        docs.run,
    ),
    "ledger": (
        "view, correct, release, redact, delete, export and import ledger memory",
        ledger.configure,
        ledger.run,
    ),
    "sessions": (
        "list sessions: binding, turns, tokens, chats needing repair",
        sessions.configure,
        sessions.run,
    ),
    "session": (
        "create a session with a binding: new --character X --architecture st",
        session.configure,
        session.run,
    ),
    "fork": (
        "fork a session at its last turn boundary, optionally to another architecture",
        fork.configure,
        fork.run,
    ),
    "card": (
        "import character cards (JSON, PNG), lorebooks and personas",
        card.configure,
        card.run,
    ),
    "st": (
        "SillyTavern: import chats, cards, lorebooks and personas (a file or a data folder)",
        st.configure,
        st.run,
    ),
    "replay": (
        "rebuild a projection from the stream or the archive, with progress",
        replay.configure,
        replay.run,
    ),
    "repair": (
        'rebuild the chats marked "needs repair" from their session logs',
        repair.configure,
        repair.run,
    ),
    "restore": (
        "republish a lost SESSIONS stream from the projector's archive",
        restore.configure,
        restore.run,
    ),
    "dream": (
        "offline consolidation into the candidate pool (dry run unless --apply); review",
        dream.configure,
        dream.run,
    ),
    "rules": (
        "rule drafts from corrections: list, accept, reject, pin; style approvals",
        rules.configure,
        rules.run,
    ),
    "test": ("run the whole test suite (starts its own servers)", testing.configure, testing.run),
}
