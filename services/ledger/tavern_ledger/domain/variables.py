"""Variable rules: names, typed JSON values and their caps, compare-and-set on revisions.

A scope (e.g. one chat) has a revision that every change bumps; a variable's revision is the
scope revision of its last write, so revisions never repeat within a scope and a deleted then
recreated variable never matches a stale expectation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tavern_ledger.domain.store_limits import StoreLimits
from tavern_ledger.toolcalls.errors import Invalid, RevisionConflict, TooLarge

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_.-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class ScopeState:
    """The scope row: its revision (0 = never written) and the bytes its variables take."""

    revision: int = 0
    total_bytes: int = 0


@dataclass(frozen=True)
class Stored:
    """A stored variable as far as the rules care: its revision and footprint."""

    name: str
    revision: int
    size: int


@dataclass(frozen=True)
class Change:
    """One write or delete; `expected` None means "whatever is current"."""

    name: str
    value: Any = None
    delete: bool = False
    expected: int | None = None


@dataclass(frozen=True)
class Write:
    name: str
    value: Any
    size: int
    previous_revision: int | None


@dataclass(frozen=True)
class Removal:
    name: str
    previous_revision: int


@dataclass(frozen=True)
class Plan:
    """What a set, patch or delete will do, decided before anything is written."""

    revision: int
    total_bytes: int
    writes: tuple[Write, ...]
    removals: tuple[Removal, ...]

    @property
    def changed(self) -> bool:
        return bool(self.writes or self.removals)


def validate_name(name: str) -> str:
    """A variable name: 1-64 characters, a letter or underscore first, then `[A-Za-z0-9_.-]`."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise Invalid(f"invalid variable name {name!r}: must match {NAME_PATTERN}")
    return name


def encoded(value: Any) -> str:
    """The canonical JSON of a value (compact, keys in order given, UTF-8 kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def value_size(value: Any) -> int:
    return len(encoded(value).encode("utf-8"))


def check_value(name: str, value: Any, limits: StoreLimits) -> int:
    """The entry size of a legal value; refuses NUL characters, deep nesting and oversize."""
    _check_shape(value, limits.max_value_depth, 0)
    size = value_size(value)
    if size > limits.max_value_bytes:
        raise TooLarge(
            f"variable {name!r} is {size} bytes encoded; the limit is {limits.max_value_bytes}"
        )
    return len(name.encode("utf-8")) + size


def _check_shape(value: Any, max_depth: int, depth: int) -> None:
    if depth > max_depth:
        raise Invalid(f"values may nest at most {max_depth} levels deep")
    if isinstance(value, str):
        if "\x00" in value:
            raise Invalid("values may not contain NUL characters")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_shape(key, max_depth, depth + 1)
            _check_shape(item, max_depth, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_shape(item, max_depth, depth + 1)


def json_type(value: Any) -> str:
    """The JSON type of a value: null, boolean, integer, number, string, array or object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def summarize(value: Any, chars: int) -> str:
    """A short view of a value for listings: scalars as JSON, containers by shape."""
    if isinstance(value, dict):
        keys = ", ".join(list(value)[:8])
        more = ", ..." if len(value) > 8 else ""
        return _cut(f"{{{keys}{more}}} ({len(value)} keys)", chars)
    if isinstance(value, list):
        return f"[{len(value)} items]"
    return _cut(encoded(value), chars)


def _cut(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: max(0, chars - 1)] + "…"


def plan(
    scope: ScopeState,
    stored: Mapping[str, Stored],
    changes: Sequence[Change],
    limits: StoreLimits,
    *,
    expected_scope_revision: int | None = None,
) -> Plan:
    """Check every revision, name and cap, all or nothing; the new scope revision is
    `scope.revision + 1` when anything changes."""
    _check_scope_revision(scope, expected_scope_revision)
    _check_unique(changes)
    writes: list[Write] = []
    removals: list[Removal] = []
    total = scope.total_bytes
    for change in changes:
        current = stored.get(validate_name(change.name))
        _check_revision(change, current)
        if current is not None:
            total -= current.size
        if change.delete:
            if current is not None:
                removals.append(Removal(change.name, current.revision))
            continue
        size = check_value(change.name, change.value, limits)
        total += size
        previous = current.revision if current is not None else None
        writes.append(Write(change.name, change.value, size, previous))
    _check_scope_size(total, limits)
    changed = bool(writes or removals)
    return Plan(scope.revision + changed, total, tuple(writes), tuple(removals))


def _check_scope_revision(scope: ScopeState, expected: int | None) -> None:
    if expected is not None and expected != scope.revision:
        raise RevisionConflict(
            f"the scope is at revision {scope.revision}, not {expected}: read it again and retry",
            current_revision=scope.revision,
        )


def _check_revision(change: Change, current: Stored | None) -> None:
    revision = current.revision if current is not None else 0
    if change.expected is None or change.expected == revision:
        return
    state = f"is at revision {revision}" if current is not None else "does not exist"
    raise RevisionConflict(
        f"variable {change.name!r} {state}, not revision {change.expected}",
        current_revision=revision,
        name=change.name,
    )


def _check_unique(changes: Sequence[Change]) -> None:
    names = [c.name for c in changes]
    if len(set(names)) != len(names):
        raise Invalid("a patch may change each variable only once")


def _check_scope_size(total: int, limits: StoreLimits) -> None:
    if total > limits.max_scope_bytes:
        raise TooLarge(
            f"the scope would hold {total} bytes of variables; the limit is "
            f"{limits.max_scope_bytes}"
        )
