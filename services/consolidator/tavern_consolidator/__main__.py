"""`python -m tavern_consolidator`: run the consolidator service until SIGTERM/SIGINT."""

from __future__ import annotations

from tavern_consolidator.app import SERVICE, build_app
from tavern_consolidator.config import ConsolidatorSettings
from tavern_runtime.service import run_service


def main() -> None:
    run_service(SERVICE, build_app, ConsolidatorSettings())


if __name__ == "__main__":
    main()
