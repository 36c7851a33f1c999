"""`python -m tavern_loop`: run the loop service until SIGTERM/SIGINT."""

from __future__ import annotations

from tavern_loop.app import SERVICE, build_app
from tavern_loop.config import LoopSettings
from tavern_runtime.service import run_service


def main() -> None:
    run_service(SERVICE, build_app, LoopSettings())


if __name__ == "__main__":
    main()
