"""A group chat's cast for one turn: the members' names and who is chosen to speak.

The names come from the members' cards (the projector); a card out of reach is named by its
id, so choosing never fails a turn. The choice itself is the pure `domain.speakers`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tavern_events.envelope import SessionEvent
from tavern_events.group import GroupBinding, Speaker
from tavern_loop.domain.groupchat import chat_lines
from tavern_loop.domain.speakers import Choice, Line, choose, resolve_member, turn_rng
from tavern_loop.inputs import PendingInput
from tavern_loop.profiles.assets import Assets, AssetsUnavailable
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

NAME_CHARS = 128


@dataclass
class Cast:
    group: GroupBinding
    assets: Assets
    names: dict[str, str] = field(default_factory=dict)
    avatars: dict[str, str] = field(default_factory=dict)

    async def load(self) -> Cast:
        for cid in self.group.member_ids():
            if cid in self.names:
                continue
            try:
                found = await self.assets.member(cid)
            except AssetsUnavailable as exc:
                log.warning("member_card_unavailable", character_id=cid, error=str(exc))
                found = None
            self.names[cid] = found[0] if found else cid
            if found and found[1]:
                self.avatars[cid] = found[1]
        return self

    def speaker(self, member: str) -> Speaker:
        return Speaker(
            character_id=member,
            name=self.names.get(member, member)[:NAME_CHARS],
            avatar=self.avatars.get(member),
        )

    def for_claim(
        self,
        session_id: str,
        turn: int,
        events: Sequence[SessionEvent],
        claimed: list[PendingInput],
    ) -> Choice | None:
        """Who answers this claim: the member a `speak` command names, or the strategy's
        choice for the claimed messages (None: the claim is neither)."""
        command = next((c.slash for c in claimed if c.slash is not None), None)
        if command is not None:
            if command.payload.name != "speak":
                return None
            asked = command.payload.args.get("name")
            if not isinstance(asked, str) or not asked.strip():
                return Choice((), "/speak: name the member who should speak")
            return resolve_member(asked, self.group, self.names)
        said = [Line(None, c.message.payload.text) for c in claimed if c.message is not None]
        if not said:
            return None
        history = [*chat_lines(events), *said]
        rng = turn_rng(session_id, turn)
        return Choice(choose(self.group, self.names, history, rng, user_input=True))

    def next_auto(
        self, session_id: str, turn: int, index: int, events: Sequence[SessionEvent]
    ) -> str | None:
        """The member who answers the others in auto mode's `index`-th reply of the turn."""
        rng = turn_rng(session_id, turn, f"auto-{index}")
        chosen = choose(self.group, self.names, chat_lines(events), rng, user_input=False)
        return chosen[0] if chosen else None
