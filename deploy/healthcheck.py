"""Container health check: exit 0 when this container's service answers 200 on /readyz.

The service listens on TAVERN_HEALTH_PORT; with port 0 it picks a free port and records it in
<TAVERN_DATA_DIR>/run/<service>.health, which is read instead. Standard library only.
Usage: python healthcheck.py [PATH]   (default /readyz; /healthz for liveness only)
"""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

TIMEOUT_S = 3.0
ANY_ADDRESS = ("", "0.0.0.0", "::")


def _from_health_file() -> str | None:
    """The URL the (only) service of this container recorded, if it recorded one."""
    run_dir = Path(os.environ.get("TAVERN_DATA_DIR", ".tavern")) / "run"
    records = sorted(run_dir.glob("*.health"))
    if len(records) != 1:
        return None
    try:
        return str(json.loads(records[0].read_text())["url"])
    except (OSError, ValueError, KeyError):
        return None


def base_url() -> str | None:
    """Where the probes listen, or None when that is not known."""
    port = int(os.environ.get("TAVERN_HEALTH_PORT", "0") or 0)
    if port <= 0:
        return _from_health_file()
    host = os.environ.get("TAVERN_HEALTH_HOST", "127.0.0.1")
    host = "127.0.0.1" if host in ANY_ADDRESS else host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def main(argv: list[str]) -> int:
    base = base_url()
    if base is None:
        print("unhealthy: no TAVERN_HEALTH_PORT and no health file of a running service")
        return 1
    url = base.replace("://0.0.0.0:", "://127.0.0.1:") + (argv[1] if len(argv) > 1 else "/readyz")
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:
            return 0 if response.status == 200 else 1
    except urllib.error.HTTPError as exc:
        print(f"unhealthy: {url} answered {exc.code}: {exc.read(500).decode(errors='replace')}")
    except OSError as exc:
        print(f"unhealthy: {url}: {exc}")
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
