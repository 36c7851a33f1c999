"""The data dir notes of `tavern up`: one instance per dir, servers file, endpoint resolution."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tavern_cli.endpoints import resolve
from tavern_cli.rundir import Layout, Servers, UpLock, read_servers, write_servers
from tavern_runtime.errors import ConfigurationError


def test_second_up_on_the_same_data_dir_is_refused_naming_the_first(tmp_path: Path) -> None:
    first, second = UpLock(Layout(tmp_path)), UpLock(Layout(tmp_path))
    first.acquire()
    try:
        with pytest.raises(ConfigurationError, match=f"pid {os.getpid()}.*already runs"):
            second.acquire()
    finally:
        first.release()
    second.acquire()  # free again once the first let go
    second.release()


def test_servers_file_is_private_and_read_back_while_its_owner_lives(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    write_servers(layout, Servers("nats://127.0.0.1:1", "postgresql://u:pw@h/db", "", os.getpid()))
    assert stat.S_IMODE(layout.servers_file.stat().st_mode) == 0o600
    assert read_servers(layout) == Servers(
        "nats://127.0.0.1:1", "postgresql://u:pw@h/db", "", os.getpid()
    )


def test_servers_file_of_a_dead_up_is_ignored(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    write_servers(layout, Servers("nats://127.0.0.1:1", "", "", 2**22 + 12345))
    assert read_servers(layout) is None


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delenv("TAVERN_NATS_URL", raising=False)
    monkeypatch.delenv("TAVERN_DATABASE_URL", raising=False)
    return monkeypatch


def test_endpoints_come_from_a_running_up(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    layout = Layout(tmp_path)
    write_servers(layout, Servers("nats://127.0.0.1:7", "postgresql://h:7/t", "", os.getpid()))
    found = resolve(layout)
    assert (found.nats_url, found.database_url) == ("nats://127.0.0.1:7", "postgresql://h:7/t")
    assert "tavern up" in found.source


def test_environment_beats_a_running_up(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    layout = Layout(tmp_path)
    write_servers(layout, Servers("nats://127.0.0.1:7", "postgresql://h:7/t", "", os.getpid()))
    clean_env.setenv("TAVERN_NATS_URL", "nats://elsewhere:4222")
    found = resolve(layout)
    assert found.nats_url == "nats://elsewhere:4222"
    assert found.source == "environment"


def test_command_line_beats_everything(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("TAVERN_NATS_URL", "nats://elsewhere:4222")
    found = resolve(Layout(tmp_path), nats_url="nats://cli:4222")
    assert found.nats_url == "nats://cli:4222"
    assert found.source == "command line"


def test_no_default_server_without_anything(tmp_path: Path, clean_env: pytest.MonkeyPatch) -> None:
    """Nothing named and no `tavern up`: no server at all (the default port may be anyone's)."""
    found = resolve(Layout(tmp_path))
    assert found.nats_url == ""
    assert found.database_url == ""
    assert found.nats_servers == []
    assert "nothing is running on" in found.nothing_running().message
