"""Profiles over a stand-in projector RPC: identity, warnings, refusals (no servers)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from structlog.testing import capture_logs

from tavern_loop.domain.state import Binding
from tavern_loop.options import ProfileOptions
from tavern_loop.profiles import AgentProfile, ProfileUnavailable, StProfile, profile_for
from tavern_loop.profiles.assets import Assets
from tavern_loop.sessionlog import HeldLog
from tests.unit.profiles.builders import Log

MIRA = {"name": "Mira", "nickname": "", "description": "The keeper's apprentice. " * 30}


def rpc_answering(fields: dict[str, Any] | None, error: str | None = None) -> Any:
    async def rpc(subject: str, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        if error is not None:
            return {"error": {"code": error, "message": f"{subject} {error}"}}
        return {"fields": fields if body["kind"] == "character" else {"name": "Ren"}}

    return rpc


def kernel_of(rpc: Any, binding: Binding) -> str:
    profile = profile_for("s1", binding, rpc, ProfileOptions(), [], lambda: datetime.now(UTC))
    assert isinstance(profile, AgentProfile)
    return asyncio.run(profile.kernel())


def test_a_card_without_a_summary_gives_name_and_short_description_and_a_warning() -> None:
    binding = Binding(character_id="mira", persona_id="ren")
    with capture_logs() as logs:
        kernel = kernel_of(rpc_answering(MIRA), binding)
    assert "Identity: Mira: The keeper's apprentice." in kernel
    assert "User: Ren." in kernel
    assert "The keeper's apprentice. " * 10 not in kernel, "a very short description only"
    warned = [e for e in logs if e["event"] == "identity_summary_missing"]
    assert warned[0]["character_id"] == "mira"


def test_an_unreachable_projector_leaves_the_model_to_fetch_the_card() -> None:
    with capture_logs() as logs:
        kernel = kernel_of(rpc_answering(None, "unavailable"), Binding(character_id="mira"))
    assert "its card could not be loaded; call tavern_character_get" in kernel
    assert [e["event"] for e in logs] == ["identity_unavailable"]


def test_an_st_session_without_its_card_fails_rather_than_guess() -> None:
    binding = Binding(architecture="st", context_mode=None, character_id="mira")
    assets = Assets(rpc_answering(None, "unavailable"), "s1", binding)
    profile = StProfile(assets, ProfileOptions(), lambda: datetime.now(UTC))
    log = Log()
    log.created(architecture="st", character_id="mira")
    held = HeldLog("s1", writer=None, events=log.events)  # type: ignore[arg-type]
    with pytest.raises(ProfileUnavailable, match="the st prompt needs the card"):
        asyncio.run(profile.plan(held, 1, 8000, None))
