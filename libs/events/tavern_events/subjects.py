"""Every subject name of the contract, and the validation of the ids that go into them.

This is the only module that builds subjects. Ids are `[A-Za-z0-9_-]{1,64}`: never a dot or a
wildcard, so an id can never widen a subscription or escape its session's subject space.
"""

from __future__ import annotations

import re

ROOT = "tavern"
ID_PATTERN = r"^[A-Za-z0-9_-]{1,64}$"
_ID = re.compile(ID_PATTERN)
_TOKEN = re.compile(r"^[a-z][a-z0-9-]{0,63}$")

SESSIONS_ALL = f"{ROOT}.session.>"
INPUTS_ALL = f"{ROOT}.input.>"
LEDGER_ALL = f"{ROOT}.ledger.>"
ASSETS_ALL = f"{ROOT}.asset.>"
DLQ_ALL = f"{ROOT}.dlq.>"
RPC_LEDGER_ALL = f"{ROOT}.rpc.ledger.>"
RPC_PROJECTOR_ALL = f"{ROOT}.rpc.projector.>"


class InvalidIdError(ValueError):
    """An id that may not be used in a subject (empty, too long, a dot, a wildcard...)."""


def validate_id(value: str, *, what: str = "id") -> str:
    """Return `value` if it is a legal subject id, else raise `InvalidIdError` naming `what`."""
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidIdError(f"invalid {what} {value!r}: must match {ID_PATTERN}")
    return value


def is_valid_id(value: str) -> bool:
    return isinstance(value, str) and bool(_ID.fullmatch(value))


def _token(value: str, *, what: str) -> str:
    if not _TOKEN.fullmatch(value):
        raise InvalidIdError(f"invalid {what} {value!r}: lower-case word expected")
    return value


def split_type(event_type: str) -> tuple[str, str]:
    """`"turn/start"` -> `("turn", "start")`, each part a lower-case token."""
    family, sep, name = event_type.partition("/")
    if not sep:
        raise InvalidIdError(f"invalid event type {event_type!r}: expected family/name")
    return _token(family, what="event family"), _token(name, what="event name")


# --- session log --------------------------------------------------------------------------------


def session_event(session_id: str, event_type: str) -> str:
    """`tavern.session.<sid>.<family>.<name>` for one event of a session log."""
    family, name = split_type(event_type)
    return f"{ROOT}.session.{validate_id(session_id, what='session id')}.{family}.{name}"


def session_filter(session_id: str) -> str:
    """Every event of one session: the subject guarded by the conditional append."""
    return f"{ROOT}.session.{validate_id(session_id, what='session id')}.>"


def session_id_of(subject: str) -> str:
    """The session id of a session-event or input subject."""
    parts = subject.split(".")
    if len(parts) < 4 or parts[0] != ROOT or parts[1] not in ("session", "input"):
        raise InvalidIdError(f"not a session or input subject: {subject!r}")
    return validate_id(parts[2], what="session id")


# --- inputs -------------------------------------------------------------------------------------


def session_input(session_id: str, kind: str) -> str:
    """`tavern.input.<sid>.<kind>`: kind is `message`, `cancel` or `command`."""
    return f"{ROOT}.input.{validate_id(session_id, what='session id')}.{_token(kind, what='kind')}"


def input_filter(session_id: str) -> str:
    return f"{ROOT}.input.{validate_id(session_id, what='session id')}.>"


# --- ledger, assets, dead letters ---------------------------------------------------------------


def ledger_fact(scope_id: str, event_type: str) -> str:
    """`tavern.ledger.<scope>.<family>.<name>`: a fact the ledger committed in one scope."""
    family, name = split_type(event_type)
    return f"{ROOT}.ledger.{validate_id(scope_id, what='scope id')}.{family}.{name}"


def asset_event(asset_kind: str, asset_id: str, event_type: str) -> str:
    """`tavern.asset.<kind>.<id>.<name>` for an imported or edited asset."""
    _, name = split_type(event_type)
    kind = _token(asset_kind, what="asset kind")
    return f"{ROOT}.asset.{kind}.{validate_id(asset_id, what='asset id')}.{name}"


def dead_letter(service: str) -> str:
    """`tavern.dlq.<service>`: where a consumer of `service` parks a poison message."""
    return f"{ROOT}.dlq.{_token(service, what='service')}"


def rpc(service: str, operation: str) -> str:
    """`tavern.rpc.<service>.<operation>`; operation may be dotted (`history.search`)."""
    for part in operation.split("."):
        _token(part.replace("_", "-"), what="rpc operation")
    return f"{ROOT}.rpc.{_token(service, what='service')}.{operation}"
