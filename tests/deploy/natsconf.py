"""Run the real deploy/nats configs on loopback: a copy with free ports and a temp store dir.

Only addresses and paths are rewritten; users, permissions, JetStream and cluster settings are
the files' own. Servers are started as processes and stopped by their own PID.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tavern_runtime.embedded import free_ports, nats_server_binary

REPO = Path(__file__).resolve().parents[2]
NATS_DIR = REPO / "deploy" / "nats"
CLUSTER_CONFIGS = ("n1.conf", "n2.conf", "n3.conf")
USERS = ("operator", "loop", "ledger", "projector", "consolidator", "gateway", "client")

PASSWORDS: dict[str, str] = {f"NATS_{u.upper()}_PASSWORD": f"test-{u}-pw" for u in USERS}
PASSWORDS["NATS_ROUTE_PASSWORD"] = "test-route-pw"


def password(user: str) -> str:
    return PASSWORDS[f"NATS_{user.upper()}_PASSWORD"]


def server_env(base: Mapping[str, str]) -> dict[str, str]:
    """`base` plus every password variable accounts.conf and the cluster configs reference."""
    return {**base, **PASSWORDS}


def validate(
    path: Path, env: Mapping[str, str], *, unset: str = ""
) -> subprocess.CompletedProcess[str]:
    """`nats-server -t -c FILE`: parse and check a config without starting the server, with the
    password variables set (all but `unset`)."""
    return subprocess.run(
        [nats_server_binary(), "-t", "-c", str(path)],
        capture_output=True,
        text=True,
        env={k: v for k, v in server_env(env).items() if k != unset},
        timeout=30,
        check=False,
    )


@dataclass
class Node:
    """One server of a local copy: its rewritten config and its ports."""

    name: str
    config: Path
    store: Path
    port: int
    http_port: int
    route_port: int = 0
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, env: Mapping[str, str]) -> None:
        log = (self.config.parent / f"{self.name}.log").open("ab")
        self.process = subprocess.Popen(
            [nats_server_binary(), "-c", str(self.config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=server_env(env),
            start_new_session=True,
        )

    def healthy(self, query: str = "js-enabled-only=true") -> bool:
        url = f"http://127.0.0.1:{self.http_port}/healthz?{query}"
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def wait_listening(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                log = (self.config.parent / f"{self.name}.log").read_text(errors="replace")
                raise AssertionError(f"{self.name} exited:\n{log[-3000:]}")
            if self.healthy("js-server-only=true"):
                return
            time.sleep(0.05)
        raise AssertionError(f"{self.name} did not listen within {timeout}s")

    def kill(self) -> None:
        """kill -9 of this node only."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = 10.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def _swap(text: str, old: str, new: str, *, count: int = 1) -> str:
    """Replace the literal `old` (which must occur exactly `count` times) with `new`."""
    found = text.count(old)
    if found != count:
        raise AssertionError(f"expected {old!r} {count} time(s) in the config, found {found}")
    return text.replace(old, new)


def _local(text: str, node: Node) -> str:
    """Loopback ports and a temp store instead of the production addresses and /data."""
    text = _swap(text, 'listen: "0.0.0.0:4222"', f'listen: "127.0.0.1:{node.port}"')
    text = _swap(text, 'http: "127.0.0.1:8222"', f'http: "127.0.0.1:{node.http_port}"')
    return _swap(text, 'store_dir: "/data"', f'store_dir: "{node.store}"')


def single_node(work: Path) -> Node:
    """deploy/nats/single.conf (with accounts.conf beside it) on free loopback ports."""
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(NATS_DIR / "accounts.conf", work / "accounts.conf")
    port, http_port = free_ports(2)
    node = Node("single", work / "single.conf", work / "store", port, http_port)
    node.config.write_text(_local((NATS_DIR / "single.conf").read_text(), node))
    return node


def route_env(nodes: list[Node]) -> dict[str, str]:
    """The NATS_ROUTE_URL_<n> variables of the cluster configs, with the route credentials."""
    secret = PASSWORDS["NATS_ROUTE_PASSWORD"]
    return {
        f"NATS_ROUTE_URL_{index}": f"nats-route://route:{secret}@127.0.0.1:{node.route_port}"
        for index, node in enumerate(nodes, start=1)
    }


def cluster(work: Path) -> list[Node]:
    """deploy/nats/n1..n3.conf on free loopback ports; start each with `route_env(nodes)`."""
    work.mkdir(parents=True, exist_ok=True)
    shutil.copy(NATS_DIR / "accounts.conf", work / "accounts.conf")
    ports = free_ports(9)
    nodes = []
    for index, name in enumerate(("n1", "n2", "n3")):
        port, http_port, route_port = ports[3 * index : 3 * index + 3]
        config, store = work / f"{name}.conf", work / f"{name}-store"
        nodes.append(Node(name, config, store, port, http_port, route_port))
    for node, source in zip(nodes, CLUSTER_CONFIGS, strict=True):
        text = _local((NATS_DIR / source).read_text(), node)
        text = _swap(text, 'listen: "0.0.0.0:6222"', f'listen: "127.0.0.1:{node.route_port}"')
        node.config.write_text(text)
    return nodes
