"""LLM providers of the loop: the protocol, OpenAI-compatible streaming, offline, routing."""

from tavern_llm.base import (
    AttemptFailed,
    ChatRequest,
    Fallback,
    FinalMessage,
    Provider,
    ProviderError,
    StreamDelta,
    StreamItem,
    ToolCall,
    ToolCallDelta,
    Usage,
    assemble,
    is_context_overflow,
)
from tavern_llm.config import LLMConfig
from tavern_llm.offline import OfflineProvider
from tavern_llm.openai import OpenAIProvider
from tavern_llm.router import ProviderRouter, Target, build_router

__all__ = [
    "AttemptFailed",
    "ChatRequest",
    "Fallback",
    "FinalMessage",
    "LLMConfig",
    "OfflineProvider",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "ProviderRouter",
    "StreamDelta",
    "StreamItem",
    "Target",
    "ToolCall",
    "ToolCallDelta",
    "Usage",
    "assemble",
    "build_router",
    "is_context_overflow",
]
