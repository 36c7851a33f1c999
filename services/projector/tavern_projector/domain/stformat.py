"""SillyTavern's on-disk conventions: JSONL lines, send dates, chat file names.

JSON is written the way `JSON.stringify` does (compact, non-ASCII kept), one line per entry.
A chat SillyTavern re-saves is not byte-identical: its saveChat joins the lines without a
trailing newline, and it adds what its front end keeps (author's-note settings in
`chat_metadata`, for one). Chats live in one folder per card, named by the card's file stem
(`default_Seraphina.png` -> `chats/default_Seraphina/`), as SillyTavern looks for them.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime, tzinfo
from typing import Any

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_UNSAFE = re.compile(r'[/\\?<>:*|"\x00-\x1f\x80-\x9f]')
_RESERVED = re.compile(r"^(con|prn|aux|nul|com\d|lpt\d)(\..*)?$", re.IGNORECASE)
MAX_NAME_BYTES = 200


class ChatFormatError(ValueError):
    """A chat file that is not SillyTavern JSONL (the message names the 1-based line)."""


_COMPACT = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def dumps(value: Any) -> str:
    """Compact JSON as `JSON.stringify` writes it (no ASCII escaping, no spaces); one encoder
    for every call (a chat replay encodes each message it writes)."""
    return _COMPACT.encode(value)


def send_date(ts: datetime, tz: tzinfo) -> str:
    """ST's message time stamp, e.g. `June 19, 2023 2:20pm` (getMessageTimeStamp)."""
    local = ts.astimezone(tz)
    hours = local.hour % 12 or 12
    meridiem = "pm" if local.hour >= 12 else "am"
    return (
        f"{MONTHS[local.month - 1]} {local.day}, {local.year} {hours}:{local.minute:02d}{meridiem}"
    )


def create_date(ts: datetime, tz: tzinfo) -> str:
    """ST's chat creation stamp, e.g. `2023-06-19@14h20m05s` (humanizedDateTime)."""
    return ts.astimezone(tz).strftime("%Y-%m-%d@%Hh%Mm%Ss")


def js_iso(ts: datetime) -> str:
    """A JS `Date` as JSON: UTC, milliseconds, `Z` (what gen_started/gen_finished hold)."""
    u = ts.astimezone(UTC)
    return (
        f"{u.year:04d}-{u.month:02d}-{u.day:02d}T{u.hour:02d}:{u.minute:02d}:{u.second:02d}"
        f".{u.microsecond // 1000:03d}Z"
    )


def safe_name(name: str, fallback: str = "_") -> str:
    """A file or directory name SillyTavern would accept (sanitize-filename rules)."""
    cleaned = unicodedata.normalize("NFC", _UNSAFE.sub("", name)).strip().rstrip(". ")
    if cleaned in ("", ".", "..") or _RESERVED.match(cleaned):
        return fallback
    while len(cleaned.encode()) > MAX_NAME_BYTES:
        cleaned = cleaned[:-1]
    return cleaned


def card_stem(filename: str | None) -> str | None:
    """The chats folder SillyTavern gives a card imported from `filename`: the stem of a PNG
    (SillyTavern keeps cards as PNG files and names the folder after the file); None for any
    other file (SillyTavern stores such a card as `<name>.png`, so the name decides)."""
    if not filename or not filename.lower().endswith(".png"):
        return None
    stem = safe_name(filename.rsplit("/", 1)[-1][: -len(".png")], "")
    return stem or None


def render(header: dict[str, Any], messages: Sequence[dict[str, Any]]) -> bytes:
    """The whole file: header line, one line per message, trailing newline."""
    lines = [dumps(header), *(dumps(m) for m in messages)]
    return ("\n".join(lines) + "\n").encode()


def parse(data: bytes) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Header and messages of a chat file; raises `ChatFormatError` naming the bad line."""
    objects = parse_lines(data)
    if not objects:
        raise ChatFormatError("chat log is empty")
    return objects[0], objects[1:]


def parse_lines(data: bytes) -> list[dict[str, Any]]:
    """Every JSON object line of a file (a group chat has no header); blank lines skipped."""
    objects: list[dict[str, Any]] = []
    for number, line in enumerate(data.decode().split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ChatFormatError(f"line {number}: not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ChatFormatError(f"line {number}: not a JSON object")
        objects.append(value)
    return objects
