"""Who the CLI acts as on the bus: the local operator, or the user named by `--user NAME`.

Its requests and inputs carry that principal's token, signed with the deployment's auth key
(`TAVERN_AUTH_KEY`, else the data dir's `auth.key` that `tavern up` creates).
"""

from __future__ import annotations

import argparse

from tavern_cli.rundir import data_dir_from_env
from tavern_events.subjects import InvalidIdError, validate_id
from tavern_runtime import principals
from tavern_runtime.auth import Credentials
from tavern_runtime.principals import Principal
from tavern_runtime.settings import TavernSettings

_acting: list[Principal] = [principals.OPERATOR]


def add_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--user",
        metavar="NAME",
        default=None,
        help="act as this user (default: the local operator)",
    )


def take_option(argv: list[str], skip: tuple[str, ...]) -> tuple[str | None, list[str]]:
    """`--user NAME` (or `--user=NAME`) wherever it stands, e.g. after `tavern ledger query`,
    and the arguments without it; untouched for the commands in `skip` (`tavern test` hands
    its arguments to pytest)."""
    if argv and argv[0] in skip:
        return None, argv
    user: str | None = None
    rest: list[str] = []
    words = iter(argv)
    for word in words:
        if word == "--user":
            user = next(words, None)
            if user is None:
                raise SystemExit("tavern: --user needs a NAME")
        elif word.startswith("--user="):
            user = word.partition("=")[2]
        else:
            rest.append(word)
    return user, rest


def act_as(user: str | None) -> None:
    """Act as `user` from now on (None: the operator)."""
    if user is None:
        _acting[0] = principals.OPERATOR
        return
    try:
        validate_id(user, what="user name")
    except InvalidIdError as exc:
        raise SystemExit(f"tavern: {exc}") from None
    _acting[0] = principals.user(user)


def principal() -> Principal:
    return _acting[0]


def credentials() -> Credentials:
    """The deployment's credentials; `ConfigurationError` if there is no auth key."""
    return Credentials.of(TavernSettings(data_dir=data_dir_from_env()))
