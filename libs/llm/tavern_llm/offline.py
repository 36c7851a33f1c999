"""The `offline` provider: a deterministic stand-in for a language model (demo and tests).

Same messages in, same reply out: no network, no clock, no randomness. By default the reply
comes at once; `words_per_s` paces it a word at a time, as a model streams (demos, and loads
that should cost what streaming costs).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
from collections import OrderedDict
from collections.abc import AsyncGenerator
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from tavern_llm.base import (
    ChatRequest,
    ProviderError,
    StreamDelta,
    StreamItem,
    ToolCallDelta,
    Usage,
    assemble,
)
from tavern_llm.phrases import (
    Recalled,
    ToolRequest,
    is_question,
    is_recall,
    matching,
    message_text,
    nudged,
    recalled_lines,
    remember_topic,
    speaker_in,
    tool_requests,
)
from tavern_llm.tokens import BLOCK_OVERHEAD, ROLE_OVERHEAD, tools_tokens

NAME = "offline"
MODEL = "offline-1"
CONTEXT_WINDOW = 32_768
WORDS_PER_DELTA = 8
CHARS_PER_TOKEN = 4
QUOTE_LIMIT = 200
RESULT_PREVIEW = 120
STAND_IN_NOTE = "(offline stand-in: I echo, recall and call tools on request; I am not a model.)"


@dataclass(frozen=True)
class Reply:
    text: str = ""
    calls: tuple[ToolRequest, ...] = ()


class OfflineProvider:
    """A clearly labelled, deterministic stand-in; it is NOT a language model.

    It answers the last user message by quoting it, cites recalled context (user messages that
    start with "[memory]"/"[recall]" or hold "- [source] text" lines) for questions, calls
    offered tools when asked in plain words (see `phrases.tool_requests`), and after tool results
    writes a one-line summary with no further call, so turns end. Every final message carries
    `offline=True`.
    """

    name = NAME
    offline = True

    def __init__(self, words_per_s: float = 0.0) -> None:
        self.pause_s = 1 / words_per_s if words_per_s > 0 else 0.0

    def context_window(self, model: str) -> int:
        return CONTEXT_WINDOW

    async def stream(self, request: ChatRequest) -> AsyncGenerator[StreamItem, None]:
        items = respond(request)
        if self.pause_s:
            items = paced(items)
        for item in items:
            # a real suspension point, so cancellation lands between deltas
            await asyncio.sleep(self.pause_s if isinstance(item, StreamDelta) else 0)
            yield item


def paced(items: list[StreamItem]) -> list[StreamItem]:
    """The text deltas of `items` split into one word each (what they add up to is unchanged)."""
    out: list[StreamItem] = []
    for item in items:
        if isinstance(item, StreamDelta) and item.text and not item.tool_calls:
            out += [replace(item, text=word) for word in re.findall(r"\S+\s*", item.text)]
        else:
            out.append(item)
    return out


def respond(request: ChatRequest) -> list[StreamItem]:
    """The whole reply to `request` as stream items: deltas, then the final message."""
    prompt = prompt_tokens(request)
    if prompt > CONTEXT_WINDOW:
        raise ProviderError(
            "context_overflow",
            f"maximum context length is {CONTEXT_WINDOW} tokens, the request has about {prompt}",
            status=400,
        )
    reply = compose(request.messages, offered_tools(request.tools))
    text, finish = _bounded(reply.text, request.max_tokens)
    deltas = text_deltas(text) + call_deltas(reply.calls, call_ids(request.messages, reply.calls))
    completion = max(1, math.ceil(sum(_delta_chars(d) for d in deltas) / CHARS_PER_TOKEN))
    usage = Usage(prompt, completion, prompt + completion)
    final = assemble(
        deltas, finish_reason=finish, usage=usage, provider=NAME, model=MODEL, offline=True
    )
    return [*deltas, final]


def offered_tools(tools: list[dict[str, Any]]) -> set[str]:
    return {t.get("function", {}).get("name", "") for t in tools} - {""}


def prompt_tokens(request: ChatRequest) -> int:
    """About a token per four characters of text, a few per message, plus the tool schemas."""
    chars = _reading(request.messages).chars
    overhead = (ROLE_OVERHEAD + BLOCK_OVERHEAD) * len(request.messages)
    return math.ceil(chars / CHARS_PER_TOKEN) + overhead + tools_tokens(request.tools)


class _Reading(NamedTuple):
    """What the stand-in read from one request's messages, kept for the next request."""

    messages: list[dict[str, Any]]  # held, so that no id in it is reused while cached
    chars: int  # text content and tool-call arguments of every message
    recalled: tuple[tuple[Recalled, ...], ...]  # of each message carrying recalled context


_READINGS: OrderedDict[int, _Reading] = OrderedDict()
_READINGS_MOST = 1024
LOOK_BACK = 32
"""How many messages back a request may have grown since a request it extends."""


def _reading(messages: list[dict[str, Any]]) -> _Reading:
    """The reading of `messages`, extending that of an earlier request whose messages begin
    these (the loop hands every request of a session the same message objects), so a step
    reads only the messages added since its last request instead of the whole history."""
    known, start = _Reading([], 0, ()), 0
    for end in range(len(messages), max(0, len(messages) - LOOK_BACK), -1):
        found = _READINGS.get(id(messages[end - 1]))
        if found is not None and _extends(messages, found.messages, end):
            known, start = found, end
            break
    chars, recalled = known.chars, list(known.recalled)
    for message in messages[start:]:
        content = message.get("content")
        chars += len(content) if isinstance(content, str) else 0
        chars += sum(len(c["function"]["arguments"]) for c in message.get("tool_calls") or ())
        if is_recall(message):
            recalled.append(tuple(recalled_lines(message)))
    reading = _Reading(list(messages), chars, tuple(recalled))
    if messages:
        _READINGS[id(messages[-1])] = reading
        _READINGS.move_to_end(id(messages[-1]))
        if len(_READINGS) > _READINGS_MOST:
            _READINGS.popitem(last=False)
    return reading


def _extends(messages: list[dict[str, Any]], earlier: list[dict[str, Any]], end: int) -> bool:
    """`messages[:end]` equal `earlier` (a list compares its items by identity first, so the
    shared history costs a pointer comparison each; only a rebuilt system message is compared
    by value)."""
    return len(earlier) == end and earlier == messages[:end]


def compose(messages: list[dict[str, Any]], offered: set[str]) -> Reply:
    """Decide the reply from the conversation alone; a group chat's member answers in its
    own name."""
    system = next((m for m in messages if m.get("role") == "system"), {})
    speaker = (speaker_in(message_text(system)) if system else None) or nudged(messages)
    reply = _compose(messages, offered, speaker)
    if speaker is None or not reply.text:
        return reply
    return replace(reply, text=f"{speaker} here. {reply.text}")


def _compose(messages: list[dict[str, Any]], offered: set[str], speaker: str | None) -> Reply:
    last: dict[str, Any] = next(
        (m for m in reversed(messages) if m.get("role") != "system" and not is_recall(m)), {}
    )
    said = message_text(last)
    if speaker and last.get("role") == "assistant" and not said.startswith(f"{speaker}: "):
        return reply_to(said, offered, recalled_context(messages))  # another member's line
    if last.get("role") == "tool":
        return Reply(text=summarise_results(messages))
    if last.get("role") != "user":
        return Reply(text="There is nothing new to answer. " + STAND_IN_NOTE)
    recalled = recalled_context(messages)
    return reply_to(message_text(last), offered, recalled)


def reply_to(text: str, offered: set[str], recalled: list[Recalled]) -> Reply:
    requests = tool_requests(text)
    calls = tuple(r for r in requests if r.tool in offered)
    if calls:
        return Reply(calls=calls)
    refused = sorted({r.tool for r in requests if r.explicit})
    if refused:
        names = ", ".join(refused)
        return Reply(text=f"I cannot call {names}: not among the tools offered to me.")
    return Reply(text=answer(text, recalled))


def recalled_context(messages: list[dict[str, Any]]) -> list[Recalled]:
    """Recalled lines, most recent message first, each line once."""
    seen: dict[Recalled, None] = {}
    for recalled in reversed(_reading(messages).recalled):
        seen.update(dict.fromkeys(recalled))
    return list(seen)


def answer(text: str, recalled: list[Recalled]) -> str:
    """Recount memories, cite recalled lines that match a question, or acknowledge."""
    said = " ".join(text.split())
    topic = remember_topic(said)
    if topic is not None:
        return _recount(topic, recalled)
    if not is_question(said):
        return f'You said: "{_quote(said)}". {STAND_IN_NOTE}'
    hits = matching(said, recalled)
    if hits:
        return "From what I recall: " + "; ".join(r.cite() for r in hits) + "."
    return f'You asked: "{_quote(said)}". Nothing I recall answers that. {STAND_IN_NOTE}'


def _recount(topic: str, recalled: list[Recalled]) -> str:
    lines = matching(topic, recalled) if topic else recalled[:5]
    if lines:
        return "I remember: " + "; ".join(r.cite() for r in lines) + "."
    return f'I remember nothing about "{topic}".' if topic else "I remember nothing yet."


def summarise_results(messages: list[dict[str, Any]]) -> str:
    """'Done: tool -> result preview; ...' for the results after the last tool-calling turn."""
    names: dict[str, str] = {}
    results: list[dict[str, Any]] = []
    for message in reversed(messages):
        if message.get("role") == "assistant" and message.get("tool_calls"):
            names = {
                c.get("id", ""): c.get("function", {}).get("name", "?")
                for c in message["tool_calls"]
            }
            break
        if message.get("role") == "tool":
            results.insert(0, message)
    parts = [f"{names.get(r.get('tool_call_id', ''), 'tool')} -> {_preview(r)}" for r in results]
    return "Done: " + "; ".join(parts)


def _preview(message: dict[str, Any]) -> str:
    text = " ".join(message_text(message).split()) or "(empty)"
    return text if len(text) <= RESULT_PREVIEW else text[:RESULT_PREVIEW] + "…"


def _quote(text: str) -> str:
    return text if len(text) <= QUOTE_LIMIT else text[:QUOTE_LIMIT] + "…"


def _bounded(text: str, max_tokens: int | None) -> tuple[str, str | None]:
    """Cut the text at `max_tokens` (finish reason "length"), like a real model would."""
    if max_tokens is None or math.ceil(len(text) / CHARS_PER_TOKEN) <= max_tokens:
        return text, None
    return text[: max_tokens * CHARS_PER_TOKEN], "length"


def text_deltas(text: str) -> list[StreamDelta]:
    words = re.findall(r"\S+\s*", text)
    return [
        StreamDelta(text="".join(words[i : i + WORDS_PER_DELTA]))
        for i in range(0, len(words), WORDS_PER_DELTA)
    ]


def call_ids(messages: list[dict[str, Any]], calls: tuple[ToolRequest, ...]) -> list[str]:
    """`call_<n>_<hash>`: the hash covers the length of the conversation and its last message,
    so ids differ from step to step (hashing all of it would cost each step the whole
    history)."""
    last = messages[-1] if messages else {}
    history = f"{len(messages)}\x00" + json.dumps(
        last, sort_keys=True, ensure_ascii=False, default=str
    )
    ids = []
    for index, call in enumerate(calls):
        seed = f"{history}\x00{index}\x00{call.tool}\x00{call.arguments}"
        ids.append(f"call_{index}_{hashlib.sha256(seed.encode()).hexdigest()[:10]}")
    return ids


def call_deltas(calls: tuple[ToolRequest, ...], ids: list[str]) -> list[StreamDelta]:
    """Each call in two fragments (head with id and name, then the rest of the arguments)."""
    deltas = []
    for index, (call, call_id) in enumerate(zip(calls, ids, strict=True)):
        half = len(call.arguments) // 2
        head = ToolCallDelta(index, call_id, call.tool, call.arguments[:half])
        deltas += [
            StreamDelta(tool_calls=(head,)),
            StreamDelta(tool_calls=(ToolCallDelta(index, arguments_delta=call.arguments[half:]),)),
        ]
    return deltas


def _delta_chars(delta: StreamDelta) -> int:
    calls = sum(len(c.name or "") + len(c.arguments_delta) for c in delta.tool_calls)
    return len(delta.text) + calls
