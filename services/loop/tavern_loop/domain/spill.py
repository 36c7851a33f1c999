"""Spill policy: a tool result over the inline limit becomes a bounded preview plus a locator."""

from __future__ import annotations

from dataclasses import dataclass

RETRIEVAL_HINT = "Use spill_read with the locator (and offset/limit) to page through it."


def _utf8_head(text: str, budget: int) -> str:
    return text.encode("utf-8")[:budget].decode("utf-8", errors="ignore")


def _utf8_tail(text: str, budget: int) -> str:
    if budget <= 0:
        return ""
    return text.encode("utf-8")[-budget:].decode("utf-8", errors="ignore")


def _notice(omitted: int, locator: str) -> str:
    return (
        f"(Omitted {omitted} bytes. Full formatted result stored at: {locator}. {RETRIEVAL_HINT})"
    )


@dataclass(frozen=True)
class SpillPreview:
    text: str
    omitted_bytes: int


def needs_spill(text: str, max_inline_bytes: int) -> bool:
    return len(text.encode("utf-8")) > max_inline_bytes


def spill_preview(text: str, locator: str, max_inline_bytes: int) -> SpillPreview | None:
    """Head and tail within the cap plus a notice; None if even that would not fit."""
    total = len(text.encode("utf-8"))
    reserve = len(_notice(total, locator).encode("utf-8")) + 2
    budget = max(0, max_inline_bytes - reserve)
    head = _utf8_head(text, (budget + 1) // 2)
    tail = _utf8_tail(text, budget // 2)
    preview = head + tail
    omitted = total - len(preview.encode("utf-8"))
    notice = _notice(omitted, locator)
    replacement = f"{preview}\n\n{notice}" if preview else notice
    if len(replacement.encode("utf-8")) > max_inline_bytes:
        return None
    return SpillPreview(replacement, omitted)
