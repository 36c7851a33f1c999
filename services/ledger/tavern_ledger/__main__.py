"""`python -m tavern_ledger`: run the ledger service until SIGTERM/SIGINT."""

from __future__ import annotations

from tavern_ledger.app import SERVICE, build_app
from tavern_ledger.config import LedgerSettings
from tavern_runtime.service import run_service


def main() -> None:
    run_service(SERVICE, build_app, LedgerSettings())


if __name__ == "__main__":
    main()
