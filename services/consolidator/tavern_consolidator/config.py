"""Settings of the consolidator: shared `TAVERN_*` keys and its own `TAVERN_CONSOLIDATOR_*`.

The model endpoint and routes are the shared `TAVERN_LLM_*` keys (`LLMConfig`), task `distil`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from tavern_runtime.settings import TavernSettings


class ConsolidatorSettings(TavernSettings):
    """Own keys are named `consolidator_*`, so their variables read `TAVERN_CONSOLIDATOR_*`."""

    consolidator_pool_max: int = Field(
        default=10, ge=1, le=200, description="Postgres connections of one process"
    )
    consolidator_rpc_deadline_s: float = Field(
        default=110.0,
        gt=0,
        description="longest a consolidator RPC may run (a dream or a distillation calls the "
        "model; `tavern dream` waits 120 s) before the caller gets a `timeout` error",
    )
    # distillation throttle (acp.md §12)
    consolidator_min_evidence: int = Field(
        default=10, ge=1, description="undigested evidence of a scope that triggers a batch"
    )
    consolidator_min_turns: int = Field(
        default=5, ge=1, description="turns since the last batch that trigger one"
    )
    consolidator_max_batch: int = Field(default=40, ge=1, le=200)
    consolidator_daily_runs: int = Field(
        default=24, ge=1, description="batches a scope may run per UTC day"
    )
    consolidator_max_tokens: int = Field(
        default=4096, ge=256, description="output budget of one distillation call"
    )
    consolidator_timeout_s: float = Field(default=30.0, gt=0, description="one model attempt")
    consolidator_llm_retries: int = Field(
        default=0, ge=0, description="provider-level retries inside one attempt"
    )
    consolidator_retry_base_s: float = Field(
        default=60.0, ge=0, description="wait after a failed batch, doubled per failure"
    )
    consolidator_retry_max_s: float = Field(default=3600.0, ge=0)
    consolidator_poll_s: float = Field(
        default=30.0, gt=0, description="how often scopes are re-checked without new facts"
    )
    consolidator_coalesce_s: float = Field(
        default=1.0, ge=0, le=60, description="how long a woken scope waits for more wakes"
    )
    consolidator_consumer_batch: int = Field(default=256, ge=1, le=1000)
    consolidator_consumer_wait_s: float = Field(default=0.5, gt=0, le=10)
    consolidator_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="scheduling niceness of the process: consolidation yields the CPU to the "
        "turns people wait on (0 = as started)",
    )
    consolidator_judge_claims: bool = Field(
        default=True,
        description="ask the model whether each new claim of fact updates or contradicts the "
        "speaker's earlier ones, and have the ledger end those (only with a model configured)",
    )
    # rules feedback channel (acp.md §18)
    consolidator_rule_daily_runs: int = Field(default=4, ge=1)
    consolidator_rule_window_days: int = Field(default=7, ge=1)
    consolidator_rule_overlap: float = Field(default=0.6, gt=0, le=1)
    consolidator_rules_dir: Path | None = Field(
        default=None, description="where `<domain>.md` rule views are written; unset = none"
    )
    # expression promotion (acp.md §17): floors apply, config can only be stricter
    consolidator_auto_promote: bool = False
    consolidator_policy_min_events: int = Field(default=2, ge=0)
    consolidator_policy_min_strong: int = Field(default=1, ge=0)
    consolidator_policy_max_age_days: int = Field(default=30, ge=0)
    # dreaming (acp.md §16)
    consolidator_dream_archive_days: int = Field(default=90, ge=1)

    @property
    def niceness(self) -> int:
        return self.consolidator_nice
