"""Session event -> evidence draft (acp.md §5): human input and tool output only, never the
model's own text, recall injections, guard reminders, compaction summaries or machine templates.
Deterministic, no model, no IO.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from tavern_events.envelope import SessionEvent
from tavern_events.message import UserMessage
from tavern_events.reach import memory_scope
from tavern_events.session import SessionCreated
from tavern_events.tool import ToolResult
from tavern_ledger.domain.claims import claim_domain
from tavern_ledger.domain.contradiction import is_correction
from tavern_ledger.domain.noise import machine_template
from tavern_ledger.domain.vocabulary import INSTRUCTIONAL, SessionType

MAX_EVENT_TEXT_CHARS = 4000
SESSION_EVENT_INGEST = "session-event"
UNKNOWN_SOURCE_INGEST = "session-event-unknown-source"
"""Not a trusted ingest path: such evidence is quarantined (fail closed)."""

_SURROGATE = re.compile("[\ud800-\udfff]")
READING_TOOLS: frozenset[str] = frozenset(
    {
        "acp_query",
        "memory_search",
        "memory_read",
        "variable_get",
        "variable_list",
        "tavern_history_search",
        "tavern_lore_search",
        "tavern_character_get",
        "tavern_scene_get",
        "tavern_speaker_choose",
        "spill_read",
    }
)
"""Tools that read what the tavern already holds (memory, the ledger, chat history, cards and
lorebooks, spilled output, the group's own members). Their results are never evidence, whatever
the configuration: ingesting them would echo memory into memory
(tests/unit/ledger/test_reading_tools.py lists every tool the loop offers and holds each to this
rule or names why it may feed the ledger)."""
STORE_TOOLS: frozenset[str] = frozenset(
    {
        "memory_write",
        "memory_update",
        "memory_forget",
        "variable_set",
        "variable_patch",
        "variable_delete",
    }
)
"""Tools that change the ledger's own stores: their replies repeat what was just stored."""
DEFAULT_SKIP_TOOLS: frozenset[str] = READING_TOOLS | STORE_TOOLS


@dataclass(frozen=True)
class SessionFacts:
    """What ingestion knows of a session from its `session/created`."""

    session_id: str
    chat_id: str
    session_type: SessionType = "root"
    parent_session_id: str | None = None
    scope_id: str = ""
    """Where its evidence lives (`tavern_events.reach.memory_scope`); empty: its chat."""
    owner: str = "local"

    @classmethod
    def unknown(cls, session_id: str) -> SessionFacts:
        """A session whose creation ingestion has not seen: a root session of its own chat."""
        return cls(session_id, session_id)

    @property
    def scope(self) -> str:
        return self.scope_id or self.chat_id or self.session_id


@dataclass(frozen=True)
class ExtractConfig:
    subagent_downgrade: bool = True
    skip_tools: frozenset[str] = DEFAULT_SKIP_TOOLS
    """Tools whose results are not evidence; the reading tools are skipped even if left out."""


@dataclass(frozen=True)
class Draft:
    """Evidence as extracted from one session event, before the write gate."""

    text: str
    source_class: str
    authority: str
    claim_domain: str
    confidence: float
    durability: float
    ingest: str
    label: str
    session_id: str
    seq: int
    event_id: str
    observed_at: datetime
    session_type: SessionType
    agent_key: str
    sensitivity: str = "private"


@dataclass(frozen=True)
class Skip:
    """Why an event is not evidence."""

    reason: str


def session_facts_of(event: SessionCreated) -> SessionFacts:
    """A session's type from its creation: forked, created by an agent (a subagent), or root."""
    payload = event.payload
    kind: SessionType = "root"
    if payload.parent_session_id is not None:
        kind = "fork"
    if event.source.startswith("agent:"):
        kind = "subagent"
    scope = memory_scope(
        chat_id=payload.chat_id,
        character_id=payload.character_id,
        agent_id=payload.agent_id,
        reach=payload.memory_reach,
        owner=payload.owner,
    )
    return SessionFacts(
        event.session_id, payload.chat_id, kind, payload.parent_session_id, scope, payload.owner
    )


def extract(
    event: SessionEvent, session: SessionFacts, config: ExtractConfig = ExtractConfig()
) -> Draft | Skip:
    """The evidence draft of one session event, or why there is none."""
    if isinstance(event, UserMessage):
        return _user_message(event, session, config)
    if isinstance(event, ToolResult):
        return _tool_result(event, session, config)
    return Skip(f"type:{event.type}")


def _user_message(event: UserMessage, session: SessionFacts, config: ExtractConfig) -> Draft | Skip:
    if event.source.startswith("plugin:") or event.form is not None:
        return Skip(f"injected:{event.source}")
    text = clamp(event.payload.text)
    noise = _noise(text)
    if noise:
        return Skip(noise)
    if event.source.startswith("agent:"):
        return _draft(event, session, text, "agent_inference", label=event.source)
    if event.source != "user":
        return _draft(event, session, text, "unknown", label=event.source)
    if session.session_type == "subagent" and config.subagent_downgrade:
        return _draft(event, session, text, "agent_inference", label="subagent")
    kind = "user_correction" if is_correction(text) else "user_input"
    return _draft(event, session, text, kind, label=user_label(event.actor_id))


def _tool_result(event: ToolResult, session: SessionFacts, config: ExtractConfig) -> Draft | Skip:
    payload = event.payload
    if payload.synthetic or not payload.ok:
        return Skip("tool:not_a_tool_output")
    if payload.name in READING_TOOLS or payload.name in config.skip_tools:
        return Skip(f"tool:ledger_echo:{payload.name}")
    text = clamp(payload.content)
    noise = _noise(text)
    if noise:
        return Skip(noise)
    return _draft(event, session, text, "external_tool", label=f"tool:{payload.name}")


def _noise(text: str) -> str | None:
    if not text:
        return "empty"
    if "<system-reminder>" in text:
        return "system-reminder"
    template = machine_template(text)
    return f"machine-template:{template}" if template else None


_KINDS: dict[str, tuple[str, str, str, float, float]] = {
    # kind -> source class, authority, claim domain, confidence, durability (acp.md §5)
    "user_input": ("user_input", "user_explicit", "user_fact", 0.9, 0.5),
    "user_correction": ("user_correction", "user_correction", "user_preference", 1.0, 0.9),
    "external_tool": ("external_tool", "external_information", "external_fact", 0.5, 0.5),
    "agent_inference": ("agent_authored", "agent_inference", "experience", 0.5, 0.5),
    "unknown": ("agent_authored", "single_observation", "experience", 0.5, 0.5),
}


def _draft(
    event: SessionEvent, session: SessionFacts, text: str, kind: str, *, label: str
) -> Draft:
    source_class, authority, domain, confidence, durability = _KINDS[kind]
    if source_class in INSTRUCTIONAL:  # a person's words: a directive or a statement of fact
        domain = claim_domain(text)
    ingest = UNKNOWN_SOURCE_INGEST if kind == "unknown" else SESSION_EVENT_INGEST
    return Draft(
        text=text,
        source_class=source_class,
        authority=authority,
        claim_domain=domain,
        confidence=confidence,
        durability=durability,
        ingest=ingest,
        label=label,
        session_id=event.session_id,
        seq=event.seq,
        event_id=event.id,
        observed_at=event.ts,
        session_type=session.session_type,
        agent_key=event.agent_id,
    )


def user_label(actor_id: str | None) -> str:
    """`user`, or `user:<actor>` when the event names its speaker (a group chat's person)."""
    return f"user:{actor_id}" if actor_id else "user"


def _valid_utf8(text: str) -> str:
    """Lone surrogates (legal in JSON, not in UTF-8) become U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def clamp(text: str, limit: int = MAX_EVENT_TEXT_CHARS) -> str:
    """Trimmed, without NUL characters (Postgres text cannot hold them), cut to `limit` with a
    visible marker that is part of the content (and so of its hash)."""
    body = _valid_utf8(text).replace("\x00", "").strip()
    if len(body) <= limit:
        return body
    return f"{body[:limit]}…[truncated {len(body)} chars]"
