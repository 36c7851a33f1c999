"""`tavern serve <service>`: run one service in the foreground, the way a container runs it."""

from __future__ import annotations

import argparse
import importlib

from tavern_cli import catalog


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("service", choices=sorted(catalog.BY_NAME), help="the service to run")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    entry = catalog.BY_NAME[args.service]
    main = importlib.import_module(f"{entry.package}.__main__").main
    main()  # run_service exits the process with the service's exit code
    return 0
