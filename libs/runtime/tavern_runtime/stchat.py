"""SillyTavern chat files as SillyTavern writes them, read tolerantly (pure, no IO).

A chat file is JSONL: a header line (`user_name`, `character_name`, `create_date`,
`chat_metadata`), then one message per line. What SillyTavern itself writes and a reader must
accept: `is_system: ""` (a string, not a boolean), a first `swipe_info` item `{}`, a separate
`swipes_info` key, `send_date` in any of the forms it has used (`June 19, 2023 2:20pm`, its
humanized `2024-07-12@01h31m37s`, Unix milliseconds, ISO 8601), CRLF line ends, a byte order
mark, and no trailing newline. Unknown fields are kept as they are.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from tavern_runtime.errors import ValidationFailed

MONTHS = {
    name: number
    for number, name in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        ),
        start=1,
    )
}
_MERIDIEM = re.compile(r"(\w+)\s(\d{1,2}),\s(\d{4})\s(\d{1,2}):(\d{1,2})(am|pm)", re.IGNORECASE)
_HUMANIZED = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})\s?@(\d{1,2})h\s?(\d{1,2})m\s?(\d{1,2})s")
_DIGITS = re.compile(r"^\d+$")

HIDDEN = "hidden"
SYSTEM = "system"
USER = "user"
CHARACTER = "character"


class ChatFileError(ValidationFailed):
    """Not a SillyTavern chat file; the message names the 1-based line."""


@dataclass(frozen=True)
class StChat:
    """A parsed chat file: its header, its message lines in order, and its identity."""

    header: dict[str, Any]
    lines: tuple[dict[str, Any], ...]
    content_hash: str


def parse_chat(data: bytes, *, group: bool = False) -> StChat:
    """The header and lines of a chat file; raises `ChatFileError` naming what is wrong.

    A group chat has no header line as SillyTavern's `group/save` writes it (its metadata is in
    the group's definition); one that has one may hold only `chat_metadata`."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ChatFileError(f"not UTF-8 text (byte {exc.start})") from None
    objects = [_line(number, raw) for number, raw in enumerate(text.split("\n"), start=1)]
    found = [(number, value) for number, value in objects if value is not None]
    if not found:
        raise ChatFileError("the file holds no lines")
    number, head = found[0]
    named = (
        ("user_name", "character_name", "chat_metadata")
        if group
        else ("user_name", "character_name")
    )
    if group and ("mes" in head or "name" in head):  # SillyTavern writes no header line there
        number, head, found = 0, {}, [(0, {}), *found]
    elif "mes" in head or not any(k in head for k in named):
        raise ChatFileError(f"line {number}: not a chat header (no user_name/character_name)")
    lines = tuple(_message(n, value) for n, value in found[1:])
    return StChat(head, lines, hashlib.sha256(data).hexdigest())


def _line(number: int, raw: str) -> tuple[int, dict[str, Any] | None]:
    raw = raw.rstrip("\r")
    if not raw.strip():
        return number, None
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ChatFileError(f"line {number}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ChatFileError(f"line {number}: not a JSON object")
    return number, value


def _message(number: int, line: dict[str, Any]) -> dict[str, Any]:
    mes = line.get("mes", "")
    if not isinstance(mes, str):
        raise ChatFileError(f"line {number}: `mes` is not text")
    swipes = line.get("swipes")
    if swipes is not None and not (
        isinstance(swipes, list) and all(isinstance(s, str) for s in swipes)
    ):
        raise ChatFileError(f"line {number}: `swipes` is not a list of texts")
    return line


def kind_of(line: dict[str, Any]) -> str:
    """`hidden` (SillyTavern leaves it out of the prompt), `system` (a narrator or other system
    line), `user` or `character`. `is_system` counts as JavaScript truthiness does."""
    if _truthy(line.get("is_system")):
        return HIDDEN
    extra = line.get("extra")
    if isinstance(extra, dict) and isinstance(extra.get("type"), str) and extra["type"]:
        return SYSTEM
    return USER if _truthy(line.get("is_user")) else CHARACTER


def _truthy(value: Any) -> bool:
    return value not in (None, False, "", 0)


def text_of(line: dict[str, Any]) -> str:
    """The line's shown text: `mes` (SillyTavern keeps the chosen swipe there)."""
    mes = line.get("mes", "")
    return mes if isinstance(mes, str) else ""


def send_time(value: Any, tz: tzinfo) -> datetime | None:
    """A `send_date` or `create_date` as an aware time (local forms read in `tz`), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) or (isinstance(value, str) and _DIGITS.match(value)):
        return _from_unix_ms(float(value))
    if not isinstance(value, str) or not value.strip():
        return None
    return _meridiem(value, tz) or _humanized(value, tz) or _iso(value, tz)


def _from_unix_ms(ms: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC) if ms >= 0 else None
    except (OverflowError, OSError, ValueError):
        return None


def _meridiem(value: str, tz: tzinfo) -> datetime | None:
    match = _MERIDIEM.search(value)
    if match is None:
        return None
    month_name, day, year, hour, minute, meridiem = match.groups()
    month = MONTHS.get(month_name.lower()) or MONTHS.get(_full_month(month_name.lower()), 0)
    hour24 = int(hour) % 12 + (12 if meridiem.lower() == "pm" else 0)
    return _local(int(year), month, int(day), hour24, int(minute), 0, tz)


def _full_month(prefix: str) -> str:
    return next((name for name in MONTHS if len(prefix) >= 3 and name.startswith(prefix)), "")


def _humanized(value: str, tz: tzinfo) -> datetime | None:
    match = _HUMANIZED.search(value)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(g) for g in match.groups())
    return _local(year, month, day, hour, minute, second, tz)


def _iso(value: str, tz: tzinfo) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=tz)


def _local(
    year: int, month: int, day: int, hour: int, minute: int, second: int, tz: tzinfo
) -> datetime | None:
    try:
        return datetime(year, month, day, hour, minute, second, tzinfo=tz)
    except ValueError:
        return None
