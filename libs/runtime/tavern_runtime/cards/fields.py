"""Reading untrusted JSON objects field by field: defaults for absent (or null) values,
`CardError` naming the field for present values of the wrong type."""

from __future__ import annotations

from typing import Any

from tavern_runtime.cards.errors import CardError

_ABSENT = object()


class Fields:
    """The fields of one JSON object at `path` (e.g. `data.character_book.entries.3`)."""

    def __init__(self, value: Any, path: str) -> None:
        if not isinstance(value, dict):
            raise CardError(path, f"expected an object, got {_kind(value)}")
        self.raw: dict[str, Any] = value
        self.path = path

    def where(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(self, name: str) -> Any:
        value = self.raw.get(name, _ABSENT)
        return _ABSENT if value is None else value

    def has(self, name: str) -> bool:
        return self.get(name) is not _ABSENT

    def fail(self, name: str, problem: str) -> CardError:
        return CardError(self.where(name), problem)

    def string(self, name: str, default: str = "") -> str:
        value = self.get(name)
        if value is _ABSENT:
            return default
        if not isinstance(value, str):
            raise self.fail(name, f"expected a string, got {_kind(value)}")
        return value

    def flag(self, name: str, default: bool) -> bool:
        value = self.opt_flag(name)
        return default if value is None else value

    def opt_flag(self, name: str) -> bool | None:
        value = self.get(name)
        if value is _ABSENT:
            return None
        if not isinstance(value, bool):
            raise self.fail(name, f"expected true or false, got {_kind(value)}")
        return value

    def number(
        self, name: str, default: int, low: int | None = None, high: int | None = None
    ) -> int:
        value = self.opt_number(name, low, high)
        return default if value is None else value

    def opt_number(self, name: str, low: int | None = None, high: int | None = None) -> int | None:
        value = self.get(name)
        if value is _ABSENT:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise self.fail(name, f"expected a number, got {_kind(value)}")
        number = round(value)
        if (low is not None and number < low) or (high is not None and number > high):
            raise self.fail(name, f"{number} is out of range {_range(low, high)}")
        return number

    def strings(self, name: str) -> list[str]:
        value = self.get(name)
        if value is _ABSENT:
            return []
        if not isinstance(value, list):
            raise self.fail(name, f"expected a list of strings, got {_kind(value)}")
        for index, item in enumerate(value):
            if not isinstance(item, str):
                raise CardError(
                    f"{self.where(name)}.{index}", f"expected a string, got {_kind(item)}"
                )
        return list(value)

    def child(self, name: str) -> Fields | None:
        value = self.get(name)
        return None if value is _ABSENT else Fields(value, self.where(name))

    def mapping(self, name: str) -> dict[str, Any]:
        found = self.child(name)
        return dict(found.raw) if found is not None else {}


def _range(low: int | None, high: int | None) -> str:
    return f"{'-inf' if low is None else low}..{'inf' if high is None else high}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
