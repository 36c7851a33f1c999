"""How a command says it failed: one line on stderr (red on a terminal), never wrapped."""

from __future__ import annotations

import sys


def fail(command: str, message: str) -> int:
    """Print `tavern <command>: <message>` on stderr; the exit code to return (1)."""
    line = f"tavern {command}: {message}" if command else f"tavern: {message}"
    if sys.stderr.isatty():
        line = f"\x1b[31m{line}\x1b[0m"
    print(line, file=sys.stderr, flush=True)
    return 1
