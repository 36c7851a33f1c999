"""Agent-managed context projection (pure): which surface nodes the next request includes.

The budget is a share of the context window split into zones: kernel (system prompt and tool
schemas, never squeezed out), recent (the newest history, contiguous), retrieved (older history
ranked by relevance to the current user message, importance, freshness and source trust) and
reply (left for the answer). The current turn (its user messages, tool calls and their results)
is always included. A tool call and its results are one unit: both in or both out. Nothing is
deleted: the log keeps every entry, and an excluded one stays searchable.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tavern_llm.tokens import message_tokens
from tavern_loop.domain.history import Message, Node
from tavern_loop.options import ProjectionOptions

ALGORITHM = "p1"
_WORD = re.compile(r"[a-z0-9]+|[\u3400-\u9fff]+")
_IMPORTANCE = {"checkpoint": 1.0, "user": 0.9, "reply": 0.7, "tools": 0.5, "injected": 0.2}
FRESHNESS_TURNS = 4


@dataclass(frozen=True)
class Unit:
    """Nodes that go in or out together: one message, or a tool call with its results."""

    nodes: tuple[Node, ...]
    kind: str
    tokens: int

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(n.seq for n in self.nodes)

    @property
    def turn(self) -> int:
        return max(n.turn for n in self.nodes)

    def text(self) -> str:
        return "\n".join(_node_text(n.message) for n in self.nodes)


@dataclass(frozen=True)
class Zone:
    name: str
    budget_tokens: int
    used_tokens: int
    items: int


@dataclass(frozen=True)
class Projection:
    included: tuple[int, ...]
    """Seqs of the included nodes, in surface order."""
    required: tuple[int, ...]
    zones: tuple[Zone, ...]
    budget_tokens: int
    """The input budget: the window (or the configured ceiling) minus the reply zone."""
    token_estimate: int
    revision: str


@dataclass(frozen=True)
class Budget:
    window: int
    kernel_tokens: int
    options: ProjectionOptions

    def total(self) -> int:
        ceiling = self.options.max_budget_tokens
        return min(self.window, ceiling) if ceiling else self.window

    def share(self, ratio: float) -> int:
        return math.floor(self.total() * ratio)


def units(nodes: Sequence[Node]) -> list[Unit]:
    """The surface grouped into units, in surface order (a unit sits where it starts)."""
    grouped: list[list[Node]] = []
    owner: dict[str, int] = {}
    for node in nodes:
        call_id = node.message.get("tool_call_id")
        if node.message.get("role") == "tool" and call_id in owner:
            grouped[owner[call_id]].append(node)
            continue
        for call in node.message.get("tool_calls") or []:
            owner[call["id"]] = len(grouped)
        grouped.append([node])
    return [_unit(group) for group in grouped]


def _unit(nodes: list[Node]) -> Unit:
    tokens = sum(message_tokens(n.message) for n in nodes)
    return Unit(tuple(nodes), _kind(nodes[0]), tokens)


def _kind(node: Node) -> str:
    role = node.message.get("role")
    if role == "assistant":
        return "tools" if node.message.get("tool_calls") else "reply"
    if role == "tool":
        return "tools"
    if node.source == "user":
        return "user"
    return "checkpoint" if node.source == "host" else "injected"


def select(nodes: Sequence[Node], turn: int, query: str, budget: Budget) -> Projection:
    """The projection of the surface `nodes` for a request of turn `turn`."""
    all_units = units(nodes)
    required = [u for u in all_units if u.turn >= turn]
    older = [u for u in all_units if u.turn < turn]
    recent_budget, retrieved_budget = _zone_budgets(budget)
    used = sum(u.tokens for u in required)
    recent = _recent(older, recent_budget - used)
    taken = {id(u) for u in recent}
    rest = [u for u in older if id(u) not in taken]
    retrieved = _retrieved(rest, retrieved_budget, query, turn, budget.options)
    chosen = {seq for u in (*required, *recent, *retrieved) for seq in u.seqs}
    kernel_zone = max(budget.share(budget.options.kernel_ratio), budget.kernel_tokens)
    zones = (
        Zone("kernel", kernel_zone, budget.kernel_tokens, 1),
        Zone("recent", recent_budget, used + _tokens(recent), len(required) + len(recent)),
        Zone("retrieved", retrieved_budget, _tokens(retrieved), len(retrieved)),
    )
    return Projection(
        included=tuple(n.seq for n in nodes if n.seq in chosen),
        required=tuple(seq for u in required for seq in u.seqs),
        zones=zones,
        budget_tokens=budget.total() - budget.share(budget.options.reply_ratio),
        token_estimate=budget.kernel_tokens + sum(z.used_tokens for z in zones[1:]),
        revision=revision(budget.options),
    )


def _zone_budgets(budget: Budget) -> tuple[int, int]:
    """Recent and retrieved budgets, shrunk (retrieved first) when the kernel outgrew its zone:
    an exhausted zone never squeezes the kernel out."""
    options = budget.options
    room = budget.total() - budget.share(options.reply_ratio) - budget.kernel_tokens
    recent, retrieved = budget.share(options.recent_ratio), budget.share(options.retrieved_ratio)
    overflow = max(0, recent + retrieved - max(0, room))
    cut = min(retrieved, overflow)
    return max(0, recent - (overflow - cut)), retrieved - cut


def _recent(older: Sequence[Unit], room: int) -> list[Unit]:
    """The newest older units that fit, contiguous from the end."""
    kept: list[Unit] = []
    for unit in reversed(older):
        if unit.tokens > room:
            break
        kept.append(unit)
        room -= unit.tokens
    return kept


def _retrieved(
    candidates: Sequence[Unit], room: int, query: str, turn: int, options: ProjectionOptions
) -> list[Unit]:
    wanted = terms(query)
    ranked = sorted(candidates, key=lambda u: (-score(u, wanted, turn, options), -u.seqs[-1]))
    kept = []
    for unit in ranked:
        if unit.tokens <= room:
            kept.append(unit)
            room -= unit.tokens
    return kept


def score(unit: Unit, wanted: set[str], turn: int, options: ProjectionOptions) -> float:
    """Relevance, importance, freshness and source trust, weighted."""
    relevance = len(wanted & terms(unit.text())) / len(wanted) if wanted else 0.0
    freshness = 1 / (1 + max(0, turn - unit.turn) / FRESHNESS_TURNS)
    return (
        options.relevance_weight * relevance
        + options.importance_weight * _IMPORTANCE.get(unit.kind, 0.5)
        + options.freshness_weight * freshness
        + options.trust_weight * min(trust(n.source) for n in unit.nodes)
    )


def trust(source: str) -> float:
    """How far an entry's source is trusted: the user, the host, a tool, a plugin."""
    if source == "user":
        return 1.0
    if source in ("host", "system"):
        return 0.8
    return 0.6 if source.startswith("tool:") else 0.3


def terms(text: str) -> set[str]:
    """Lower-case words of three letters or more, and CJK character pairs."""
    found: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if word[0].isascii():
            if len(word) >= 3:
                found.add(word)
        else:
            found.update(word[i : i + 2] for i in range(max(1, len(word) - 1)))
    return found


def revision(options: ProjectionOptions) -> str:
    """Names the algorithm and its settings: the same revision selects the same way."""
    digest = hashlib.sha256(repr(options).encode()).hexdigest()[:10]
    return f"{ALGORITHM}-{digest}"


def project(nodes: Iterable[Node], included: Iterable[int]) -> list[Message]:
    """The messages of a projection: the included nodes, in surface order."""
    chosen = set(included)
    return [n.message for n in nodes if n.seq in chosen]


def query_of(nodes: Sequence[Node], turn: int) -> str:
    """What the current turn's user said (the relevance query)."""
    return "\n".join(_node_text(n.message) for n in nodes if n.turn >= turn and n.source == "user")


def _tokens(chosen: Iterable[Unit]) -> int:
    return sum(u.tokens for u in chosen)


def _node_text(message: Message) -> str:
    content = message.get("content")
    text = content if isinstance(content, str) else ""
    calls = [c["function"].get("arguments", "") for c in message.get("tool_calls") or []]
    return "\n".join([text, *calls]) if calls else text
