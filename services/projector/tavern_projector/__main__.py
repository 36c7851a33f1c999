"""`python -m tavern_projector`: run the projector service until SIGTERM/SIGINT."""

from __future__ import annotations

from tavern_projector.app import SERVICE, build_app
from tavern_projector.config import ProjectorSettings
from tavern_runtime.service import run_service


def main() -> None:
    run_service(SERVICE, build_app, ProjectorSettings())


if __name__ == "__main__":
    main()
