"""Free ports for the embedded servers: the kernel may hand out the port it just gave again once
its socket is closed, so the NATS monitor asks for one besides the client port (a server whose
two listeners got the same port exits at start)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from tavern_runtime.embedded import EmbeddedNats, free_port, free_ports

pytestmark = pytest.mark.integration


def test_a_free_port_is_none_of_those_taken_already() -> None:
    for _ in range(200):
        first = free_port()
        assert free_port(besides=(first,)) != first
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert free_port() != port, "a port something listens on is not free"
    for _ in range(50):
        assert len(set(free_ports(9))) == 9, "ports asked together are all different"


def test_the_monitor_never_shares_the_client_port(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel handing out the same port twice in a row, made certain: the server starts."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        same = int(probe.getsockname()[1])
    picks = iter([same, same])
    real = free_port

    def kernel_repeats(host: str = "127.0.0.1", besides: tuple[int, ...] = ()) -> int:
        port = next(picks, None)
        if port is not None and port not in besides:
            return port
        return real(host, besides)

    monkeypatch.setattr("tavern_runtime.embedded.free_port", kernel_repeats)
    server = EmbeddedNats(tmp_path / "nats", port=same)
    server.start()
    try:
        assert (server.port, server.http_port != server.port) == (same, True)
    finally:
        server.stop()
