"""CHARX character cards: a zip holding `card.json` (a V3 card) and its `assets/` (pure).

The card's V3 `assets` list (`embeded://assets/...` URIs) is kept in the card as it is; the
files themselves stay in the zip the user has. The zip is read within bounds: at most
`MAX_CARD_BYTES` for `card.json`, whatever the archive claims."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

from tavern_runtime.cards.errors import CardError

ZIP_MAGIC = b"PK\x03\x04"
MAX_CARD_BYTES = 4_000_000


def is_charx(data: bytes) -> bool:
    return data.startswith(ZIP_MAGIC)


def card_json(data: bytes) -> Any:
    """The parsed `card.json` of a CHARX file; raises `CardError` naming what is wrong."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            try:
                info = archive.getinfo("card.json")
            except KeyError:
                raise CardError("charx", "no card.json in the archive") from None
            if info.file_size > MAX_CARD_BYTES:
                raise CardError("charx.card.json", f"over {MAX_CARD_BYTES} bytes")
            with archive.open(info) as handle:
                body = handle.read(MAX_CARD_BYTES + 1)
    except zipfile.BadZipFile as exc:
        raise CardError("charx", f"not a valid zip archive ({exc})") from None
    if len(body) > MAX_CARD_BYTES:
        raise CardError("charx.card.json", f"over {MAX_CARD_BYTES} bytes")
    try:
        return json.loads(body.decode("utf-8-sig"))
    except UnicodeDecodeError:
        raise CardError("charx.card.json", "not UTF-8 text") from None
    except ValueError as exc:
        raise CardError("charx.card.json", f"not valid JSON ({exc})") from None
