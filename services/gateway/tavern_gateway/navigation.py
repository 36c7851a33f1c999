"""Where the app sends a browser after sign-in: a path of this site only (no open redirect)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

HOME = "/"
_MAX = 2048


def safe_next(wanted: str) -> str:
    """`wanted` if it is a same-origin path, else `/`.

    Browsers read `\\` as `/` and drop tabs and newlines inside URLs, so `/\\evil.example`,
    `/%09/evil.example` (once decoded) and `//evil.example` all name another host: any
    backslash, control character or space, raw or percent-encoded, and any second leading
    slash refuse the value, as does anything with a scheme or a host."""
    if not wanted or len(wanted) > _MAX or not wanted.startswith("/"):
        return HOME
    for form in (wanted, unquote(wanted)):
        if "\\" in form or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in form):
            return HOME
        if form.startswith("//") or form.startswith("/\\"):
            return HOME
        parts = urlsplit(form)
        if parts.scheme or parts.netloc:
            return HOME
    return wanted
