"""The registration table of `tavern` sub-commands: name -> (help, configure parser, run)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tavern_cli.commands import chat, docs, init, serve, status, testing, up

Configure = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace, list[str]], int]

REGISTRY: dict[str, tuple[str, Configure, Run]] = {
    "up": ("run the whole system here: servers, services, demo", up.configure, up.run),
    "status": ("show servers, streams, consumers and services", status.configure, status.run),
    "init": ("provision streams and migrate schemas on given servers", init.configure, init.run),
    "serve": ("run one service in the foreground, as a container does", serve.configure, serve.run),
    "chat": (
        "talk with a session in the terminal (/cancel, /compact, /quit)",
        chat.configure,
        chat.run,
    ),
    "docs": (
        "regenerate (or --check) the AsyncAPI documents under docs/",
        docs.configure,
        docs.run,
    ),
    "test": ("run the whole test suite (starts its own servers)", testing.configure, testing.run),
}
