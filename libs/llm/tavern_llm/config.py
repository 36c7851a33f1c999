"""LLM settings (`TAVERN_LLM_*`): the OpenAI-compatible endpoint, retries and per-task routes.

Without a `base_url` every task routes to the deterministic offline provider.
"""

from __future__ import annotations

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

TASKS = ("chat", "summarise", "distil")
OFFLINE_TARGET = "offline:offline-1"


class LLMConfig(BaseSettings):
    """Complex values (`context_windows`, `routes`) are read from the environment as JSON."""

    model_config = SettingsConfigDict(env_prefix="TAVERN_LLM_", extra="ignore", frozen=True)

    base_url: str = Field(
        default="", description="e.g. https://api.deepseek.com/v1; empty = offline"
    )
    api_key: SecretStr = SecretStr("")
    model: str = "deepseek-chat"
    context_windows: dict[str, int] = Field(default_factory=dict)
    default_context_window: int = Field(default=128_000, gt=0)
    timeout_connect_s: float = Field(default=10.0, gt=0)
    timeout_read_s: float = Field(default=120.0, gt=0, description="longest silence mid-stream")
    max_retries: int = Field(default=3, ge=0, description="retries after the first attempt")
    max_wait_s: float = Field(
        default=120.0,
        gt=0,
        description="longest wait for a reply's first output over all attempts and backoffs "
        "of one target; then the request fails (the route may fall back)",
    )
    backoff_base_s: float = Field(default=0.5, ge=0)
    backoff_max_s: float = Field(default=20.0, ge=0)
    retry_after_max_s: float = Field(
        default=60.0, ge=0, description="a longer Retry-After fails now (the router may fall back)"
    )
    offline_words_per_s: float = Field(
        default=0.0,
        ge=0,
        description="the offline stand-in streams its reply a word at a time at this pace, as "
        "a model would (0: all at once)",
    )
    routes: dict[str, list[str]] = Field(
        default_factory=dict, description='task -> ["provider:model", ...], tried in order'
    )

    @field_validator("routes")
    @classmethod
    def _targets_name_provider_and_model(cls, routes: dict[str, list[str]]) -> dict[str, list[str]]:
        for task, targets in routes.items():
            if not targets:
                raise ValueError(f"route {task!r} has no target")
            for target in targets:
                provider, _, model = target.partition(":")
                if not provider or not model:
                    raise ValueError(f"route target {target!r} is not 'provider:model'")
        return routes

    def context_window(self, model: str) -> int:
        return self.context_windows.get(model, self.default_context_window)

    def resolved_routes(self) -> dict[str, list[str]]:
        """Configured routes, and for every task without one the default target."""
        default = f"openai:{self.model}" if self.base_url else OFFLINE_TARGET
        resolved = {task: [default] for task in TASKS}
        resolved.update({task: list(targets) for task, targets in self.routes.items()})
        return resolved
