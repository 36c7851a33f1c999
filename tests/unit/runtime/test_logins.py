"""Who a process logs in as, its private inbox prefix, the generated credentials file and the
DSN of a service role: pure pieces of the embedded secure defaults."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tavern_runtime.bus import inbox_prefix_of, login_options, login_user, url_user
from tavern_runtime.credentials import (
    DB_ROLES,
    NATS_USERS,
    Credentials,
    load_or_create,
    read_credentials,
)
from tavern_runtime.dbroles import role_dsn
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.settings import TavernSettings


def test_each_user_has_its_own_inbox_prefix() -> None:
    assert inbox_prefix_of("loop") == "_INBOX_loop"
    assert inbox_prefix_of("") == "_INBOX"
    assert len({inbox_prefix_of(u) for u in NATS_USERS}) == len(NATS_USERS)


def test_the_login_user_comes_from_the_settings_else_the_url() -> None:
    assert login_user(TavernSettings(nats_user="ledger", nats_url="nats://a:1")) == "ledger"
    assert login_user(TavernSettings(nats_url="nats://client:pw@h:1,nats://h2:1")) == "client"
    assert login_user(TavernSettings(nats_url="nats://h:1")) == ""
    assert url_user("nats://op%40x:pw@h:1") == "op@x"


def test_login_options_carry_the_prefix_and_credentials_only_when_given() -> None:
    assert login_options("loop", "pw") == {
        "inbox_prefix": "_INBOX_loop",
        "user": "loop",
        "password": "pw",
    }
    assert login_options("", "", "nats://client:pw@h:1") == {"inbox_prefix": "_INBOX_client"}


def test_credentials_are_generated_once_then_reused(tmp_path: Path) -> None:
    first = load_or_create(tmp_path / "data")
    assert set(first.nats) == set(NATS_USERS)
    assert set(first.postgres) == {"postgres", *DB_ROLES}
    assert load_or_create(tmp_path / "data") == first
    assert (tmp_path / "data" / "credentials.json").stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "data").stat().st_mode & 0o777 == 0o700


def test_a_user_added_later_gets_a_password_and_the_others_keep_theirs(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    old = Credentials.generate()
    partial = {
        "nats": {k: v for k, v in old.nats.items() if k != "client"},
        "postgres": old.postgres,
    }
    (data / "credentials.json").write_text(json.dumps(partial))
    found = load_or_create(data)
    assert found.nats["loop"] == old.nats["loop"]
    assert found.nats["client"]
    assert found.nats["client"] != old.nats["client"]


def test_a_broken_credentials_file_is_refused_not_replaced(tmp_path: Path) -> None:
    (tmp_path / "credentials.json").write_text("[1, 2]")
    with pytest.raises(ConfigurationError):
        read_credentials(tmp_path)
    assert (tmp_path / "credentials.json").read_text() == "[1, 2]"


def test_repr_shows_no_secret() -> None:
    credentials = Credentials.generate()
    shown = repr(credentials)
    assert not any(
        pw in shown for pw in [*credentials.nats.values(), *credentials.postgres.values()]
    )


def test_role_dsn_swaps_the_login_and_keeps_the_rest() -> None:
    admin = "postgresql://postgres:secret@127.0.0.1:5433/tavern?sslmode=disable"
    assert role_dsn(admin, "ledger", "p/w") == (
        "postgresql://ledger:p%2Fw@127.0.0.1:5433/tavern?sslmode=disable"
    )
    assert role_dsn("postgresql://a@[::1]:5432/t", "projector", "x") == (
        "postgresql://projector:x@[::1]:5432/t"
    )
