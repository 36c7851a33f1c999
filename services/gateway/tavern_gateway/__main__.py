"""`python -m tavern_gateway`: run the gateway until SIGTERM/SIGINT."""

from __future__ import annotations

from tavern_gateway.app import main

if __name__ == "__main__":
    main()
