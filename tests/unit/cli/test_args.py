"""Argument parsing of the `tavern` sub-commands."""

from __future__ import annotations

import pytest

from tavern_cli.commands import REGISTRY
from tavern_cli.main import build_parser


def test_every_command_is_registered() -> None:
    assert {"up", "status", "init", "serve", "test"} <= set(REGISTRY)


def test_up_defaults_to_the_demo_and_no_drift_rewrite() -> None:
    args, extra = build_parser().parse_known_args(["up"])
    assert (args.command, args.no_demo, args.apply_drift, extra) == ("up", False, False, [])


def test_up_accepts_no_demo_and_apply_drift() -> None:
    args, _ = build_parser().parse_known_args(["up", "--no-demo", "--apply-drift"])
    assert args.no_demo
    assert args.apply_drift


def test_init_takes_servers_and_apply_drift() -> None:
    argv = ["init", "--nats-url", "nats://n1:4222", "--database-url", "postgresql://h/db"]
    args, _ = build_parser().parse_known_args([*argv, "--apply-drift"])
    assert args.nats_url == "nats://n1:4222"
    assert args.database_url == "postgresql://h/db"
    assert args.apply_drift


def test_status_servers_default_to_none_so_env_and_run_files_decide() -> None:
    args, _ = build_parser().parse_known_args(["status"])
    assert args.nats_url is None
    assert args.database_url is None


@pytest.mark.parametrize("service", ["loop", "ledger", "consolidator", "projector"])
def test_serve_takes_each_service(service: str) -> None:
    args, _ = build_parser().parse_known_args(["serve", service])
    assert args.service == service


def test_serve_refuses_an_unknown_service(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_known_args(["serve", "tavernkeeper"])
    assert exit_info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err


def test_unknown_option_is_an_error_for_commands_without_extras() -> None:
    from tavern_cli.main import main

    with pytest.raises(SystemExit) as exit_info:
        main(["status", "--bogus"])
    assert exit_info.value.code == 2
