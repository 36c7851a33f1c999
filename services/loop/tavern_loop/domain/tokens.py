"""A model-free token estimate: about four characters a token plus small per-block overheads."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

CHARS_PER_TOKEN = 4
BLOCK_OVERHEAD = 4
ROLE_OVERHEAD = 4


def text_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN) + BLOCK_OVERHEAD


def message_tokens(message: dict[str, Any]) -> int:
    """Tokens of one chat message in the OpenAI shape (content, tool_calls, tool results)."""
    total = ROLE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str) and content:
        total += text_tokens(content)
    elif isinstance(content, list):
        total += BLOCK_OVERHEAD + math.ceil(len(json.dumps(content)) / CHARS_PER_TOKEN)
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        total += math.ceil(len(function.get("name", "")) / CHARS_PER_TOKEN)
        total += math.ceil(len(function.get("arguments", "")) / CHARS_PER_TOKEN) + BLOCK_OVERHEAD
    return total


def messages_tokens(messages: Iterable[dict[str, Any]]) -> int:
    return sum(message_tokens(m) for m in messages)


_TOOLS_SEEN: dict[int, tuple[list[dict[str, Any]], int]] = {}
_TOOLS_SEEN_MOST = 1024


def tools_tokens(schemas: list[dict[str, Any]]) -> int:
    """Tokens of the tool schemas. A registry hands out the same list for every request, so the
    count is kept per list (it would otherwise serialise every schema several times a step)."""
    if not schemas:
        return 0
    seen = _TOOLS_SEEN.get(id(schemas))
    if seen is not None and seen[0] is schemas:
        return seen[1]
    tokens = math.ceil(len(json.dumps(schemas)) / CHARS_PER_TOKEN) + BLOCK_OVERHEAD
    if len(_TOOLS_SEEN) >= _TOOLS_SEEN_MOST:
        _TOOLS_SEEN.pop(next(iter(_TOOLS_SEEN)))
    _TOOLS_SEEN[id(schemas)] = (schemas, tokens)  # the list is kept, so its id is not reused
    return tokens


def system_tokens(system: str | None) -> int:
    return text_tokens(system) if system else 0
