"""The registration table of `tavern` sub-commands: name -> (help, configure parser, run)."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from tavern_cli.commands import testing

Configure = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace, list[str]], int]

REGISTRY: dict[str, tuple[str, Configure, Run]] = {
    "test": ("run the whole test suite (starts its own servers)", testing.configure, testing.run),
}
