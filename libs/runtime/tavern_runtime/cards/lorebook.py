"""Lorebooks (world info): SillyTavern world files and card-embedded character books, both
normalised to one shape: `{name, description, scan_depth, token_budget, recursive_scanning,
entries: [entry sorted by uid]}`, entries with SillyTavern's world-info field names."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tavern_runtime.cards.errors import CardError
from tavern_runtime.cards.fields import Fields

AND_ANY, NOT_ALL, NOT_ANY, AND_ALL = 0, 1, 2, 3
MAX_ENTRIES = 5000

Reader = Callable[[Fields, str], Any]


def _str(default: str = "") -> Reader:
    return lambda f, n: f.string(n, default)


def _flag(default: bool) -> Reader:
    return lambda f, n: f.flag(n, default)


def _opt_flag() -> Reader:
    return lambda f, n: f.opt_flag(n)


def _int(default: int, low: int | None = None, high: int | None = None) -> Reader:
    return lambda f, n: f.number(n, default, low, high)


def _opt_int(low: int | None = 0, high: int | None = None) -> Reader:
    return lambda f, n: f.opt_number(n, low, high)


def _strs() -> Reader:
    return lambda f, n: f.strings(n)


def _recursion_delay(f: Fields, n: str) -> int:
    value = f.get(n)
    if isinstance(value, bool):
        return 1 if value else 0
    return f.number(n, 0, 0)


ENTRY_FIELDS: dict[str, Reader] = {
    "key": _strs(),
    "keysecondary": _strs(),
    "comment": _str(),
    "content": _str(),
    "constant": _flag(False),
    "vectorized": _flag(False),
    "selective": _flag(True),
    "selectiveLogic": _int(AND_ANY, 0, 3),
    "order": _int(100),
    "position": _int(0, 0, 7),
    "disable": _flag(False),
    "ignoreBudget": _flag(False),
    "excludeRecursion": _flag(False),
    "preventRecursion": _flag(False),
    "delayUntilRecursion": _recursion_delay,
    "probability": _int(100, 0, 100),
    "useProbability": _flag(True),
    "depth": _int(4, 0),
    "outletName": _str(),
    "group": _str(),
    "groupOverride": _flag(False),
    "groupWeight": _int(100, 0),
    "scanDepth": _opt_int(0, 1000),
    "caseSensitive": _opt_flag(),
    "matchWholeWords": _opt_flag(),
    "useGroupScoring": _opt_flag(),
    "automationId": _str(),
    "role": _int(0, 0, 2),
    "sticky": _opt_int(),
    "cooldown": _opt_int(),
    "delay": _opt_int(),
    "triggers": _strs(),
}

# character_book entry extensions (snake_case) -> world-info field
EXTENSION_NAMES = {
    "exclude_recursion": "excludeRecursion",
    "prevent_recursion": "preventRecursion",
    "delay_until_recursion": "delayUntilRecursion",
    "probability": "probability",
    "useProbability": "useProbability",
    "depth": "depth",
    "selectiveLogic": "selectiveLogic",
    "outlet_name": "outletName",
    "group": "group",
    "group_override": "groupOverride",
    "group_weight": "groupWeight",
    "scan_depth": "scanDepth",
    "case_sensitive": "caseSensitive",
    "match_whole_words": "matchWholeWords",
    "use_group_scoring": "useGroupScoring",
    "automation_id": "automationId",
    "role": "role",
    "vectorized": "vectorized",
    "sticky": "sticky",
    "cooldown": "cooldown",
    "delay": "delay",
    "triggers": "triggers",
    "ignore_budget": "ignoreBudget",
}


def entry(fields: Fields, uid: int) -> dict[str, Any]:
    """One world-info entry with every field typed (defaults for absent ones)."""
    found: dict[str, Any] = {"uid": uid}
    for name, read in ENTRY_FIELDS.items():
        found[name] = read(fields, name)
    return found


def world_file(raw: Any, name: str) -> dict[str, Any]:
    """A SillyTavern world file: `{entries: {"<uid>": entry}}` (a list is accepted too)."""
    book = Fields(raw, "")
    entries = book.get("entries")
    if isinstance(entries, dict):
        items = list(entries.items())
    elif isinstance(entries, list):
        items = [(str(i), e) for i, e in enumerate(entries)]
    else:
        raise CardError("entries", "expected an object of entries keyed by uid")
    normalised = [_world_entry(key, value) for key, value in _bounded(items)]
    return _book(book, book.string("name", name), normalised)


def _world_entry(key: str, value: Any) -> dict[str, Any]:
    fields = Fields(value, f"entries.{key}")
    uid = fields.opt_number("uid", 0)
    if uid is None:
        uid = int(key) if key.isdigit() else 0
    return entry(fields, uid)


def character_book(raw: Any, path: str, name: str) -> dict[str, Any]:
    """A card's `character_book` (V2/V3 spec: entries as a list) in world-info form."""
    book = Fields(raw, path)
    entries = book.get("entries")
    if not isinstance(entries, list):
        raise CardError(book.where("entries"), "expected a list of entries")
    normalised = [
        _book_entry(Fields(value, f"{book.where('entries')}.{index}"), index)
        for index, value in _bounded(list(enumerate(entries)))
    ]
    return _book(book, book.string("name", name), normalised)


def _book_entry(fields: Fields, index: int) -> dict[str, Any]:
    extensions = fields.child("extensions") or Fields({}, fields.where("extensions"))
    mapped: dict[str, Any] = {
        "key": fields.strings("keys"),
        "keysecondary": fields.strings("secondary_keys"),
        "comment": fields.string("comment") or fields.string("name"),
        "content": fields.string("content"),
        "constant": fields.flag("constant", False),
        "selective": fields.flag("selective", True),
        "disable": not fields.flag("enabled", True),
        "order": _order(fields, extensions),
        "position": _position(fields, extensions),
        "caseSensitive": fields.opt_flag("case_sensitive"),
    }
    for snake, camel in EXTENSION_NAMES.items():
        if extensions.has(snake):
            mapped[camel] = extensions.get(snake)
    merged = Fields({k: v for k, v in mapped.items() if v is not None}, fields.path)
    return entry(merged, _uid(fields, extensions, index))


def _order(fields: Fields, extensions: Fields) -> int:
    if extensions.has("order"):
        return extensions.number("order", 100)
    return fields.number("insertion_order", 100)


def _position(fields: Fields, extensions: Fields) -> int:
    if isinstance(extensions.get("position"), int | float):
        return extensions.number("position", 0, 0, 7)
    where = fields.string("position")
    if where not in ("", "before_char", "after_char"):
        raise fields.fail("position", f"expected before_char or after_char, got {where!r}")
    return 1 if where == "after_char" else 0


def _uid(fields: Fields, extensions: Fields, index: int) -> int:
    found = fields.opt_number("id", 0)
    if found is None:
        found = extensions.opt_number("uid", 0)
    return index if found is None else found


def _book(book: Fields, name: str, entries: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "name": name,
        "description": book.string("description"),
        "scan_depth": book.opt_number("scan_depth", 0, 1000),
        "token_budget": book.opt_number("token_budget", 0),
        "recursive_scanning": book.flag("recursive_scanning", False),
        "entries": sorted(entries, key=lambda e: e["uid"]),
    }


def _bounded(items: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    if len(items) > MAX_ENTRIES:
        raise CardError("entries", f"{len(items)} entries is more than the limit {MAX_ENTRIES}")
    return items


def normalised(raw: Any, path: str = "") -> dict[str, Any]:
    """Re-read a stored (already normalised) book: idempotent, and tolerant of old shapes."""
    if isinstance(raw, dict) and isinstance(raw.get("entries"), list):
        book = Fields(raw, path)
        items = [Fields(e, f"{path}.entries.{i}") for i, e in enumerate(raw["entries"])]
        entries = [entry(f, f.number("uid", i, 0)) for i, f in enumerate(items)]
        return _book(book, book.string("name"), entries)
    return world_file(raw, "")
