"""The memory store's use of the ledger's one write gate (`tavern_ledger.domain.gates`)."""

from __future__ import annotations

from tavern_ledger.domain.gates import GateConfig, write_gate
from tavern_ledger.domain.memory import GateOutcome

SOURCE_CLASS = "agent_authored"
"""Memory-tool writes are the agent's own words: the same class as any agent-authored write."""


def memory_gate(text: str, claim_domain: str, config: GateConfig = GateConfig()) -> GateOutcome:
    verdict = write_gate(text, source_class=SOURCE_CLASS, claim_domain=claim_domain, config=config)
    return GateOutcome(verdict.action, tuple(verdict.reasons), verdict.text)
