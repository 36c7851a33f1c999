"""Who speaks in a group chat: SillyTavern's activation strategies, pure and seeded.

Every random draw comes from a generator seeded by the session and the turn, so a replay of
the log (or a retried turn) chooses the same speakers. Disabled members are never chosen.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tavern_events.group import GroupBinding

_WORD = re.compile(r"\b\w+\b", re.UNICODE)


@dataclass(frozen=True)
class Line:
    """One visible message of the chat: who said it (None: the user) and what."""

    speaker: str | None
    text: str


@dataclass(frozen=True)
class Choice:
    """The members who reply, in order; `refusal` says why an explicit choice was refused."""

    speakers: tuple[str, ...]
    refusal: str | None = None


def turn_rng(session_id: str, turn: int, salt: str = "") -> random.Random:
    """The generator for one turn's draws: the same session and turn give the same draws."""
    digest = hashlib.sha256(f"{session_id}\x00{turn}\x00{salt}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def words(text: str) -> list[str]:
    """The lower-cased words of `text`, as SillyTavern's `extractAllWords` finds them."""
    return [w.lower() for w in _WORD.findall(text)]


def resolve_member(asked: str, group: GroupBinding, names: Mapping[str, str]) -> Choice:
    """The user's explicit choice (`/speak NAME`): a member by name or id, if it may speak."""
    wanted = asked.strip().casefold()
    found = [
        cid
        for cid in group.member_ids()
        if wanted in (cid.casefold(), names.get(cid, cid).casefold())
    ]
    if not found:
        known = ", ".join(names.get(c, c) for c in group.member_ids())
        return Choice((), f"no member called {asked!r} in this group (members: {known})")
    if found[0] in group.disabled:
        return Choice((), f"{names.get(found[0], found[0])} is muted in this group")
    return Choice((found[0],))


def model_pick(
    asked: str, group: GroupBinding, names: Mapping[str, str], speaking: str | None
) -> Choice:
    """The model's choice of the next speaker (`tavern_speaker_choose`): only where the group
    lets the model choose; a member who may speak, and not the one speaking now unless the
    group allows self-responses."""
    if not group.model_chooses:
        return Choice((), "this group does not let the model choose who speaks")
    choice = resolve_member(asked, group, names)
    if choice.speakers and choice.speakers[0] == speaking and not group.allow_self_responses:
        return Choice((), f"{names.get(speaking, speaking)} cannot answer itself in this group")
    return choice


def choose(
    group: GroupBinding,
    names: Mapping[str, str],
    history: Sequence[Line],
    rng: random.Random,
    *,
    user_input: bool,
) -> tuple[str, ...]:
    """The members who reply now, by the group's strategy (`manual` chooses nobody).

    `history` is the chat so far, its last line the one being answered; `user_input` is
    whether that line is the user's fresh message (not members answering each other).
    """
    enabled = [m.character_id for m in group.enabled()]
    if not enabled or group.activation == "manual":
        return ()
    if group.activation == "list":
        return tuple(enabled)
    last = history[-1] if history else None
    banned = None
    if not group.allow_self_responses and not user_input and last is not None:
        banned = last.speaker
    if group.activation == "pooled":
        return _pooled(enabled, history, banned, rng)
    talk = {m.character_id: m.talkativeness for m in group.members}
    return _natural(enabled, names, talk, last.text if last else "", banned, rng)


def _natural(
    enabled: list[str],
    names: Mapping[str, str],
    talk: Mapping[str, float],
    text: str,
    banned: str | None,
    rng: random.Random,
) -> tuple[str, ...]:
    chosen: list[str] = []
    for word in words(text):  # members named, in the order the text names them
        for cid in enabled:
            if cid != banned and word in words(names.get(cid, cid)):
                chosen.append(cid)
                break
    shuffled = list(enabled)
    rng.shuffle(shuffled)
    chatty = []
    for cid in shuffled:  # then one talkativeness roll each, in shuffled order
        if cid == banned:
            continue
        if talk.get(cid, 0.5) >= rng.random():
            chosen.append(cid)
        if talk.get(cid, 0.5) > 0:
            chatty.append(cid)
    if not chosen:  # nobody activated: one at random, preferring the talkative
        pool = chatty or [c for c in enabled if c != banned] or enabled
        chosen.append(pool[rng.randrange(len(pool))])
    return tuple(dict.fromkeys(chosen))


def _pooled(
    enabled: list[str], history: Sequence[Line], banned: str | None, rng: random.Random
) -> tuple[str, ...]:
    spoke: set[str] = set()
    for line in reversed(history):
        if line.speaker is None:
            break
        spoke.add(line.speaker)
    pool = [c for c in enabled if c not in spoke]
    if not pool:  # everyone has spoken since the user: anyone but the last speaker
        pool = [c for c in enabled if c != banned] or enabled
    return (pool[rng.randrange(len(pool))],)
