"""Tunable behaviour of the loop, with the defaults of the design."""

from __future__ import annotations

from dataclasses import dataclass, field

from tavern_loop.domain.guard import GuardConfig
from tavern_loop.domain.pruner import PrunerConfig
from tavern_loop.slots import DEFAULT_TURN_SLOTS
from tavern_loop.streaming import CHUNK_INTERVAL_S


@dataclass(frozen=True)
class CompactionOptions:
    enabled: bool = True
    threshold_ratio: float = 0.8
    retain_ratio: float = 0.16
    pruner: PrunerConfig | None = field(default_factory=PrunerConfig)
    summary_max_tokens: int = 8192

    def __post_init__(self) -> None:
        if not 0 < self.retain_ratio < self.threshold_ratio <= 1:
            raise ValueError("need 0 < retain_ratio < threshold_ratio <= 1")


ARCHITECTURES = ("agent-tavern", "st")
CONTEXT_MODES = ("dsh-native", "agent-managed")


@dataclass(frozen=True)
class ProjectionOptions:
    """Agent-managed mode: the request budget split into zones (shares of the context window)
    and the weights that rank older history for the retrieved zone."""

    kernel_ratio: float = 0.15
    recent_ratio: float = 0.35
    retrieved_ratio: float = 0.25
    reply_ratio: float = 0.25
    relevance_weight: float = 0.55
    importance_weight: float = 0.2
    freshness_weight: float = 0.15
    trust_weight: float = 0.1
    max_budget_tokens: int | None = None
    """A ceiling on the projected request whatever the window (None: the window decides)."""

    def __post_init__(self) -> None:
        ratios = (self.kernel_ratio, self.recent_ratio, self.retrieved_ratio, self.reply_ratio)
        if min(ratios) < 0 or sum(ratios) > 1.000001:
            raise ValueError("projection ratios must be >= 0 and sum to at most 1")
        if self.reply_ratio >= 1:
            raise ValueError("the reply zone cannot take the whole window")


@dataclass(frozen=True)
class StOptions:
    """SillyTavern-style prompt assembly (chat completion defaults of SillyTavern)."""

    main_prompt: str = (
        "Write {{char}}'s next reply in a fictional chat between {{charIfNotGroup}} and {{user}}."
    )
    personality_format: str = "[{{char}}'s personality: {{personality}}]"
    scenario_format: str = "[Circumstances and context of the dialogue: {{scenario}}]"
    new_chat_prompt: str = "[Start a new Chat]"
    new_group_chat_prompt: str = "[Start a new group chat. Group members: {{group}}]"
    group_nudge_prompt: str = "[Write the next reply only as {{char}}.]"
    """A group chat's nudge, the last line of the chat history (SillyTavern's default)."""
    example_chat_prompt: str = "[Example Chat]"
    reply_tokens: int = 800
    """Reserved for the answer; the chat history fills what the window leaves."""
    lore_tokens: int = 1000
    scan_depth: int = 2


@dataclass(frozen=True)
class ProfileOptions:
    """Session profiles: defaults for new sessions, what agent-managed needs, write policy."""

    default_architecture: str = "agent-tavern"
    default_context_mode: str = "dsh-native"
    projection_available: bool = True
    """The native `agent/context` seam: each request may carry a projection of the log."""
    compaction_cooperates: bool = True
    """Compaction measures the effective projection (not the whole log) in agent-managed."""
    allow_global_writes: bool = False
    allow_bulk_deletes: bool = False
    identity_chars: int = 240
    """The short identity fallback (name plus description) is cut to this many characters."""
    projection: ProjectionOptions = field(default_factory=ProjectionOptions)
    st: StOptions = field(default_factory=StOptions)

    def __post_init__(self) -> None:
        if self.default_architecture not in ARCHITECTURES:
            raise ValueError(f"default_architecture must be one of {ARCHITECTURES}")
        if self.default_context_mode not in CONTEXT_MODES:
            raise ValueError(f"default_context_mode must be one of {CONTEXT_MODES}")
        if self.default_context_mode == "agent-managed" and self.managed_missing():
            missing = ", ".join(self.managed_missing())
            raise ValueError(f"default_context_mode agent-managed is unavailable: {missing}")

    def managed_missing(self) -> list[str]:
        """What agent-managed mode needs and this configuration does not offer."""
        missing = []
        if not self.projection_available:
            missing.append("request projection (agent/context) is disabled")
        if not self.compaction_cooperates:
            missing.append("compaction does not measure the effective projection")
        return missing


@dataclass(frozen=True)
class LoopOptions:
    max_steps_per_turn: int = 24
    max_input_chars: int = 32_000
    max_claims_per_turn: int = 32
    followups_per_turn: int = 1
    """Messages sent while the session was idle that one turn claims (DSH: one per turn);
    messages sent during a turn join it at its next step boundary."""
    recall: bool = True
    recall_timeout_s: float = 3.0
    approvals: bool = True
    """Ask the consolidator for style promotions awaiting a decision at a turn's first step."""
    approvals_quiet_s: float = 30.0
    """After the consolidator answered that none wait for a session, its turns do not ask again
    for this long (a promotion then shows at most this much later; under load, one question a
    turn to the consolidator was most of its work). 0: ask at every turn."""
    compaction: CompactionOptions = field(default_factory=CompactionOptions)
    guard: GuardConfig | None = field(default_factory=GuardConfig)
    spill_max_inline_bytes: int | None = 50_000
    lease_ttl_s: float = 10.0
    idle_hold_s: float = 2.0
    """How long a runner keeps an idle session's lease waiting for its next input."""
    turn_slots: int = DEFAULT_TURN_SLOTS
    """Turns of this replica that advance their logs at once, oldest first; the others wait
    their turn (`tavern_loop.slots`). A turn waiting on its model holds none. 0: no limit
    (the default)."""
    log_cache_events: int = 50_000
    """Events of logs let go that a replica keeps, so that a session's next runner reads only
    what was stored since (0: every runner reads its session's whole log)."""
    chunk_events: bool = True
    chunk_interval_s: float = CHUNK_INTERVAL_S
    """The least time between two `assistant/chunk` appends of one stream (each is a stored,
    fsynced message delivered to the archive: at one a token, a real model's reply cost more
    than the rest of its turn)."""
    profiles: ProfileOptions = field(default_factory=ProfileOptions)
