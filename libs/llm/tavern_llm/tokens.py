"""The loop's token counts: the shared CJK-aware estimate (`tavern_runtime.tokens`) plus small
per-block overheads of the chat format."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from tavern_runtime.tokens import estimate_tokens

BLOCK_OVERHEAD = 4
ROLE_OVERHEAD = 4


def text_tokens(text: str) -> int:
    return estimate_tokens(text) + BLOCK_OVERHEAD


def message_tokens(message: dict[str, Any]) -> int:
    """Tokens of one chat message in the OpenAI shape (content, tool_calls, tool results)."""
    total = ROLE_OVERHEAD
    content = message.get("content")
    if isinstance(content, str) and content:
        total += text_tokens(content)
    elif isinstance(content, list):
        total += BLOCK_OVERHEAD + estimate_tokens(json.dumps(content, ensure_ascii=False))
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        total += estimate_tokens(function.get("name", ""))
        total += estimate_tokens(function.get("arguments", "")) + BLOCK_OVERHEAD
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
    tokens = estimate_tokens(json.dumps(schemas, ensure_ascii=False)) + BLOCK_OVERHEAD
    if len(_TOOLS_SEEN) >= _TOOLS_SEEN_MOST:
        _TOOLS_SEEN.pop(next(iter(_TOOLS_SEEN)))
    _TOOLS_SEEN[id(schemas)] = (schemas, tokens)  # the list is kept, so its id is not reused
    return tokens


def system_tokens(system: str | None) -> int:
    return text_tokens(system) if system else 0
