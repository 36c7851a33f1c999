"""Settings of the ledger: shared `TAVERN_*` keys and its own `TAVERN_LEDGER_*`."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tavern_runtime.settings import TavernSettings


class LedgerSettings(TavernSettings):
    """Own keys are named `ledger_*`, so their variables read `TAVERN_LEDGER_*`."""

    ledger_pool_max: int = Field(
        default=10, ge=1, le=200, description="Postgres connections of one process"
    )
    ledger_global_scope: bool = Field(
        default=False, description="allow the `global` memory and variable scope"
    )
    # write gate
    ledger_private_data: Literal["quarantine", "redact"] = Field(
        default="quarantine", description="what the write gate does with emails, phones, cards..."
    )
    ledger_max_evidence_chars: int = Field(default=8000, ge=100, le=100_000)
    # ingestion
    ledger_subagent_downgrade: bool = True
    ledger_ingest_batch: int = Field(default=256, ge=1, le=1000)
    ledger_ingest_wait_s: float = Field(
        default=0.2, gt=0, le=10, description="longest wait to fill an ingestion batch"
    )
    # recall and composer
    ledger_hot_tokens: int = Field(default=900, ge=0, description="recall budget; 0 = unlimited")
    ledger_cross_session_policy: Literal["non-instructional", "all", "none"] = "non-instructional"
    ledger_fusion: Literal["weighted", "rrf"] = "weighted"
    ledger_hysteresis: float = Field(default=0.2, ge=0, le=2)
    ledger_recall_limit: int = Field(default=20, ge=1, le=200)
    ledger_lexical_per_term: int = Field(default=16, ge=1, le=200)
    ledger_skip_external_tool: bool = False
    ledger_observation_injection: bool = False
    ledger_observation_half_life_days: float = Field(default=30.0, ge=0)
    ledger_semantic: bool = Field(
        default=False,
        description="the semantic channel of recall (pgvector); off: recall is lexical only "
        "(corrections are judged by the sentence model either way)",
    )
    # RPC limits
    ledger_rpc_max_request_bytes: int = Field(default=512 * 1024, ge=1024, le=8 * 1024 * 1024)
    ledger_rpc_rate_per_s: float = Field(default=20.0, gt=0)
    ledger_rpc_burst: int = Field(default=40, ge=1)
    ledger_rpc_max_results: int = Field(default=200, ge=1, le=1000)
