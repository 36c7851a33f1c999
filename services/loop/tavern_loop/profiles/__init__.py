"""Session profiles: agent-tavern (dsh-native or agent-managed) and st, chosen by the binding."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from tavern_loop.domain.state import Binding
from tavern_loop.options import ProfileOptions
from tavern_loop.profiles.agent import AgentProfile
from tavern_loop.profiles.assets import Assets
from tavern_loop.profiles.base import Profile, ProfileUnavailable, RequestPlan
from tavern_loop.profiles.st import StProfile
from tavern_loop.tools.base import RpcCall

__all__ = [
    "AgentProfile",
    "Profile",
    "ProfileUnavailable",
    "RequestPlan",
    "StProfile",
    "profile_for",
]


def profile_for(
    session_id: str,
    binding: Binding,
    rpc: RpcCall,
    options: ProfileOptions,
    schemas: list[dict[str, Any]],
    clock: Callable[[], datetime],
) -> Profile:
    """The profile of a session's binding (st has no tools; agent-tavern offers them all)."""
    assets = Assets(rpc, session_id, binding)
    if binding.architecture == "st":
        return StProfile(assets, options, clock)
    return AgentProfile(assets, options, schemas)
