"""`tavern serve <service>`: run one service in the foreground, the way a container runs it."""

from __future__ import annotations

import argparse
import importlib
import os

from tavern_cli import catalog, secure
from tavern_cli.rundir import Layout, data_dir_from_env, read_servers
from tavern_runtime.credentials import read_credentials


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("service", choices=sorted(catalog.BY_NAME), help="the service to run")


def run(args: argparse.Namespace, extra: list[str]) -> int:
    entry = catalog.BY_NAME[args.service]
    _join_embedded(entry.name)
    main = importlib.import_module(f"{entry.package}.__main__").main
    main()  # run_service exits the process with the service's exit code
    return 0


def _join_embedded(service: str) -> None:
    """Beside a running `tavern up` and given no servers of its own, the service joins the
    embedded ones with its own generated logins (NATS user, database role), as `tavern up`'s
    own processes do."""
    if os.environ.get("TAVERN_NATS_URL") or os.environ.get("TAVERN_DATABASE_URL"):
        return
    layout = Layout(data_dir_from_env())
    running, credentials = read_servers(layout), read_credentials(layout.root)
    if running is None or credentials is None:
        return
    os.environ["TAVERN_NATS_URL"] = running.nats_url
    os.environ.update(secure.service_env(service, credentials, admin_dsn=running.database_url))
