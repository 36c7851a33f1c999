"""SillyTavern-style prompt assembly for `st` sessions (pure).

The order is SillyTavern's chat-completion default: main prompt (or the card's own system
prompt, `{{original}}` standing for the main one), world info before, persona, description,
personality, scenario, world info after, example dialogues (world info before and after them),
the new-chat marker; then the chat history under the token budget with `@depth` world info
inserted; then the card's post-history instructions. Macros are expanded everywhere but in the
chat history, which is sent as written.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tavern_llm.tokens import message_tokens, text_tokens
from tavern_loop.domain.macros import MacroEnv, expand
from tavern_loop.domain.stchat import ChatEntry, history_range
from tavern_loop.options import StOptions

Message = dict[str, Any]
ROLES = ("system", "user", "assistant")
BEFORE_DEFS, AFTER_DEFS, AN_TOP, AN_BOTTOM, AT_DEPTH, BEFORE_EXAMPLES, AFTER_EXAMPLES = range(7)
AUTHOR_NOTE_DEPTH = 4
_START = re.compile(r"<START>", re.IGNORECASE)


@dataclass(frozen=True)
class Card:
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    mes_example: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""

    @classmethod
    def of(cls, fields: Mapping[str, Any], default_name: str) -> Card:
        def text(key: str) -> str:
            value = fields.get(key)
            return value if isinstance(value, str) else ""

        return cls(
            name=text("name") or default_name,
            description=text("description"),
            personality=text("personality"),
            scenario=text("scenario"),
            mes_example=text("mes_example"),
            system_prompt=text("system_prompt"),
            post_history_instructions=text("post_history_instructions"),
        )


@dataclass(frozen=True)
class LoreEntry:
    """An activated world-info entry, as the projector's lore search returns it."""

    id: str
    content: str
    position: int = BEFORE_DEFS
    order: int = 100
    uid: int = 0
    depth: int = 4
    role: int = 0

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> LoreEntry:
        def number(key: str, default: int) -> int:
            value = raw.get(key)
            return value if isinstance(value, int) else default

        return cls(
            id=str(raw.get("id") or ""),
            content=str(raw.get("content") or ""),
            position=number("position", BEFORE_DEFS),
            order=number("order", 100),
            uid=number("uid", 0),
            depth=number("depth", 4),
            role=number("role", 0),
        )


@dataclass(frozen=True)
class DepthNote:
    """Text inserted `depth` messages above the end of the chat history, with a role."""

    depth: int
    role: str
    content: str


@dataclass(frozen=True)
class StInputs:
    card: Card
    user_name: str
    persona: str
    lore: Sequence[LoreEntry]
    chat: Sequence[ChatEntry]
    """The chat this request answers (a swipe leaves out the reply it replaces)."""
    env: MacroEnv
    options: StOptions = field(default_factory=StOptions)
    window_tokens: int = 8192
    group: bool = False
    """A group chat (SillyTavern's group prompt: the group's new-chat line, the members' names
    in the history, the nudge to write only as the speaking member; `env.group` names them)."""


@dataclass(frozen=True)
class StPrompt:
    system: str
    history: list[ChatEntry]
    depth: list[DepthNote]
    after: list[Message]

    def record(self) -> dict[str, Any]:
        """What `agent/request` keeps so the request can be rebuilt from the log."""
        return {
            "first": self.history[0].seq if self.history else None,
            "last": self.history[-1].seq if self.history else None,
            "depth": [vars(note) for note in self.depth],
            "after": list(self.after),
        }

    def messages(self) -> list[Message]:
        return st_messages(self.history, self.depth, self.after)


def assemble(inputs: StInputs) -> StPrompt:
    """The whole prompt of one `st` request."""
    lore = _placed(inputs.lore)
    system = _system_block(inputs, lore)
    depth = _depth_notes(inputs, lore)
    after = _after(inputs)
    fixed = text_tokens(system) + sum(text_tokens(n.content) for n in depth)
    fixed += sum(message_tokens(m) for m in after)
    budget = inputs.window_tokens - inputs.options.reply_tokens - fixed
    return StPrompt(system, fit_history(inputs.chat, budget), depth, after)


def fit_history(chat: Sequence[ChatEntry], budget: int) -> list[ChatEntry]:
    """The newest entries that fit `budget` tokens; the newest one always."""
    kept: list[ChatEntry] = []
    used = 0
    for entry in reversed(chat):
        cost = message_tokens(entry.message())
        if kept and used + cost > budget:
            break
        kept.append(entry)
        used += cost
    return list(reversed(kept))


def st_messages(
    history: Sequence[ChatEntry], depth: Sequence[DepthNote], after: Sequence[Message]
) -> list[Message]:
    """The messages after the system block: history with depth notes inserted, then `after`."""
    notes: dict[int, list[Message]] = {}
    for note in depth:  # depth counts from the end of the history as it was before inserting
        at = max(0, len(history) - note.depth)
        notes.setdefault(at, []).append({"role": note.role, "content": note.content})
    messages: list[Message] = []
    for at, entry in enumerate(history):
        messages += [*notes.get(at, []), entry.message()]
    return [*messages, *notes.get(len(history), []), *after]


def rebuild_st(chat: Sequence[ChatEntry], record: Mapping[str, Any]) -> list[Message]:
    """The messages after the system block of a recorded `st` request."""
    history = history_range(chat, record.get("first"), record.get("last"))
    depth = [DepthNote(**note) for note in record.get("depth", [])]
    return st_messages(history, depth, record.get("after", []))


# --- the parts ------------------------------------------------------------------------------------


def _placed(lore: Sequence[LoreEntry]) -> dict[int, list[LoreEntry]]:
    """Entries by position, each group in SillyTavern's order (order ascending, uid descending)."""
    groups: dict[int, list[LoreEntry]] = {}
    for entry in sorted(lore, key=lambda e: (e.order, -e.uid)):
        if entry.content.strip():
            groups.setdefault(entry.position, []).append(entry)
    return groups


def _lore_text(inputs: StInputs, entries: Sequence[LoreEntry]) -> str:
    return "\n".join(expand(e.content, inputs.env) for e in entries)


def _system_block(inputs: StInputs, lore: dict[int, list[LoreEntry]]) -> str:
    card, env, options = inputs.card, inputs.env, inputs.options
    main = expand(options.main_prompt, env)
    if card.system_prompt.strip():
        main = expand(card.system_prompt, replace(env, original=main))
    parts = [
        main,
        _lore_text(inputs, lore.get(BEFORE_DEFS, [])),
        expand(inputs.persona, env),
        expand(card.description, env),
        _formatted(options.personality_format, "personality", card.personality, env),
        _formatted(options.scenario_format, "scenario", card.scenario, env),
        _lore_text(inputs, lore.get(AFTER_DEFS, [])),
        _lore_text(inputs, lore.get(BEFORE_EXAMPLES, [])),
        *_examples(inputs),
        _lore_text(inputs, lore.get(AFTER_EXAMPLES, [])),
        expand(options.new_group_chat_prompt if inputs.group else options.new_chat_prompt, env),
    ]
    return "\n\n".join(p.strip() for p in parts if p.strip())


def _formatted(template: str, name: str, value: str, env: MacroEnv) -> str:
    if not value.strip():
        return ""
    return expand(template.replace("{{" + name + "}}", expand(value, env)), env)


def _examples(inputs: StInputs) -> list[str]:
    text = expand(inputs.card.mes_example, inputs.env)
    header = expand(inputs.options.example_chat_prompt, inputs.env)
    blocks = [b.strip() for b in _START.split(text)]
    return [f"{header}\n{block}" for block in blocks if block]


def _depth_notes(inputs: StInputs, lore: dict[int, list[LoreEntry]]) -> list[DepthNote]:
    """`@depth` entries grouped by (depth, role); author's-note positions at depth 4, system."""
    grouped: dict[tuple[int, str], list[LoreEntry]] = {}
    for entry in lore.get(AT_DEPTH, []):
        role = ROLES[entry.role] if 0 <= entry.role < len(ROLES) else "system"
        grouped.setdefault((max(0, entry.depth), role), []).append(entry)
    for position in (AN_TOP, AN_BOTTOM):
        for entry in lore.get(position, []):
            grouped.setdefault((AUTHOR_NOTE_DEPTH, "system"), []).append(entry)
    return [
        DepthNote(depth, role, _lore_text(inputs, entries))
        for (depth, role), entries in sorted(grouped.items())
    ]


def _after(inputs: StInputs) -> list[Message]:
    """After the history: a group's nudge (the end of SillyTavern's chat history), then the
    card's post-history instructions."""
    nudge = expand(inputs.options.group_nudge_prompt, inputs.env).strip() if inputs.group else ""
    text = expand(inputs.card.post_history_instructions, inputs.env).strip()
    return [{"role": "system", "content": t} for t in (nudge, text) if t]
