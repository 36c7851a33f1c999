"""`tavern test`: the whole suite with pytest; extra arguments go to pytest."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.set_defaults(accepts_extra=True)
    parser.epilog = "Any further arguments are passed to pytest, e.g. `tavern test -k writer -x`."


def run(args: argparse.Namespace, extra: list[str]) -> int:
    root = Path.cwd()
    if not (root / "tests").is_dir():
        print("tavern test: run it from the project checkout (no tests/ here)", file=sys.stderr)
        return 2
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "pytest", *extra]
    return subprocess.call(cmd, cwd=root, env=env)
