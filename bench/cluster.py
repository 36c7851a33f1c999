"""A 3-node JetStream cluster on loopback for the benches' `cluster` server: every node fsyncs
each write (`sync_interval: always`) and streams are R3, as deploy/nats/n1..n3.conf run them
(without their accounts and TLS-free routes only; the nodes share this machine's cores and disk,
so the figure is a floor for separate machines' throughput, not their latency)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from nats.js import JetStreamContext

from tavern_runtime.embedded import free_ports, nats_server_binary

NAMES = ("b1", "b2", "b3")


@dataclass
class Node:
    name: str
    root: Path
    port: int
    http_port: int
    route_port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def config(self, routes: list[str]) -> str:
        listed = ", ".join(f'"{r}"' for r in routes)
        return (
            f'server_name: "{self.name}"\nlisten: "127.0.0.1:{self.port}"\n'
            f'http: "127.0.0.1:{self.http_port}"\nmax_payload: 8MB\n'
            f'jetstream {{\n  store_dir: "{self.root / "store"}"\n  sync_interval: always\n}}\n'
            f'cluster {{\n  name: "bench"\n  listen: "127.0.0.1:{self.route_port}"\n'
            f"  routes: [{listed}]\n}}\n"
        )

    def healthy(self) -> bool:
        """JetStream is up and the cluster has elected its meta leader."""
        url = f"http://127.0.0.1:{self.http_port}/jsz"
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                meta = json.loads(response.read()).get("meta_cluster") or {}
        except (OSError, ValueError):
            return False
        return bool(meta.get("leader"))


class Cluster:
    """Start with `start()`, stop with `stop()`; `url` is the first node's."""

    def __init__(self, root: Path) -> None:
        ports = free_ports(3 * len(NAMES))
        self.nodes = [
            Node(name, root / name, ports[3 * i], ports[3 * i + 1], ports[3 * i + 2])
            for i, name in enumerate(NAMES)
        ]

    @property
    def url(self) -> str:
        return self.nodes[0].url

    def start(self, timeout: float = 30.0) -> None:
        routes = [f"nats-route://127.0.0.1:{n.route_port}" for n in self.nodes]
        for node in self.nodes:
            node.root.mkdir(parents=True, exist_ok=True)
            config = node.root / "nats.conf"
            config.write_text(node.config(routes))
            log = (node.root / "nats-server.log").open("ab")
            node.process = subprocess.Popen(
                [nats_server_binary(), "-c", str(config)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + timeout
        while not all(node.healthy() for node in self.nodes):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the bench cluster did not become healthy")
            time.sleep(0.2)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.terminate()
        for node in self.nodes:
            if node.process is not None:
                try:
                    node.process.wait(10)
                except subprocess.TimeoutExpired:
                    node.process.kill()


async def led(js: JetStreamContext, *streams: str, timeout: float = 30.0) -> None:
    """Wait until each stream has a leader and current replicas (at once on one server)."""
    deadline = time.monotonic() + timeout
    for name in streams:
        while True:
            info = await js.stream_info(name)
            replicas = info.cluster.replicas if info.cluster else None
            if info.cluster is None or (
                info.cluster.leader and all(r.current for r in replicas or [])
            ):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"stream {name} has no leader")
            await asyncio.sleep(0.1)
