"""LLM providers of the loop: the protocol, OpenAI-compatible streaming, offline, routing."""

from tavern_loop.providers.base import (
    ChatRequest,
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
from tavern_loop.providers.config import LLMConfig
from tavern_loop.providers.offline import OfflineProvider
from tavern_loop.providers.openai import OpenAIProvider
from tavern_loop.providers.router import ProviderRouter, Target, build_router

__all__ = [
    "ChatRequest",
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
