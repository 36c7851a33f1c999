from __future__ import annotations

import pytest
from pydantic import ValidationError

from tavern_llm.config import LLMConfig


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for key in [k for k in os.environ if k.startswith("TAVERN_LLM_")]:
        monkeypatch.delenv(key)


def test_without_base_url_every_task_routes_offline() -> None:
    assert LLMConfig().resolved_routes() == {
        "chat": ["offline:offline-1"],
        "summarise": ["offline:offline-1"],
        "distil": ["offline:offline-1"],
    }


def test_with_base_url_tasks_default_to_the_configured_model() -> None:
    config = LLMConfig(base_url="https://api.deepseek.com/v1", model="deepseek-chat")
    assert config.resolved_routes()["summarise"] == ["openai:deepseek-chat"]


def test_routes_and_context_windows_are_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TAVERN_LLM_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("TAVERN_LLM_API_KEY", "sk-env")
    monkeypatch.setenv("TAVERN_LLM_ROUTES", '{"chat": ["openai:llama3:8b", "offline:offline-1"]}')
    monkeypatch.setenv("TAVERN_LLM_CONTEXT_WINDOWS", '{"llama3:8b": 8192}')
    config = LLMConfig()
    assert config.resolved_routes()["chat"] == ["openai:llama3:8b", "offline:offline-1"]
    assert config.resolved_routes()["distil"] == ["openai:deepseek-chat"]
    assert (config.context_window("llama3:8b"), config.context_window("other")) == (8192, 128_000)
    assert "sk-env" not in repr(config)
    assert config.api_key.get_secret_value() == "sk-env"


@pytest.mark.parametrize("target", ["openai", ":model", "openai:"])
def test_a_route_target_needs_provider_and_model(target: str) -> None:
    with pytest.raises(ValidationError):
        LLMConfig(routes={"chat": [target]})


def test_an_empty_route_is_rejected() -> None:
    with pytest.raises(ValidationError):
        LLMConfig(routes={"chat": []})
