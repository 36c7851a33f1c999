"""The agent-tavern profile: the kernel contract, tools, and (agent-managed) the projection.

The kernel is built once per turn from the bound character's short identity and the persona
(the projector's `character.get`); everything else the model fetches with tools. In
`dsh-native` the request carries the whole surface; in `agent-managed` a projection of it.
"""

from __future__ import annotations

from typing import Any

from tavern_llm.tokens import system_tokens, tools_tokens
from tavern_loop.domain.kernel import (
    KernelFacts,
    Persona,
    kernel_prompt,
    short_identity,
    user_persona,
)
from tavern_loop.domain.projection import Budget, project, query_of, select
from tavern_loop.domain.state import Binding
from tavern_loop.options import ProfileOptions
from tavern_loop.profiles.assets import IDENTITY_FIELDS, Assets, AssetsUnavailable
from tavern_loop.profiles.base import RequestPlan
from tavern_loop.sessionlog import HeldLog
from tavern_runtime.logs import get_logger

log = get_logger(__name__)
MANAGED = "agent-managed"


class AgentProfile:
    recall = True
    compacts = True

    def __init__(
        self,
        assets: Assets,
        options: ProfileOptions,
        schemas: list[dict[str, Any]],
    ) -> None:
        self.assets, self.options, self.schemas = assets, options, schemas
        self.binding: Binding = assets.binding
        self.label = f"agent-tavern/{self.binding.context_mode}"
        self._kernel: str | None = None

    async def plan(self, held: HeldLog, turn: int, window: int, form: str | None) -> RequestPlan:
        system = await self.kernel()
        params: dict[str, Any] = {"system": system, "profile": self.label}
        if self.binding.context_mode != MANAGED:
            history = held.messages()
            tokens = held.surface.tokens()
            return RequestPlan(system, self.schemas, history, params, history_tokens=tokens)
        nodes = held.surface.nodes()
        kernel = system_tokens(system) + tools_tokens(self.schemas)
        budget = Budget(window, kernel, self.options.projection)
        projection = select(nodes, turn, query_of(nodes, turn), budget)
        history = project(nodes, projection.included)
        generation = held.surface.generation
        return RequestPlan(system, self.schemas, history, params, projection, generation)

    async def kernel(self) -> str:
        """The system prompt of this turn (loaded once: the same for every step)."""
        if self._kernel is None:
            self._kernel = kernel_prompt(await self._facts())
        return self._kernel

    async def _facts(self) -> KernelFacts:
        character = await self._identity()
        return KernelFacts(
            session_id=self.assets.session_id,
            context_mode=self.binding.context_mode or "dsh-native",
            character=character,
            user=await self._user(),
            character_bound=self.binding.character_id is not None,
            offered=[s["function"]["name"] for s in self.schemas],
            global_writes=self.options.allow_global_writes,
        )

    async def _identity(self) -> Persona | None:
        try:
            fields = await self.assets.character(IDENTITY_FIELDS, self.options.identity_chars * 4)
        except AssetsUnavailable as exc:
            log.warning("identity_unavailable", session_id=self.assets.session_id, error=str(exc))
            return None
        if fields is None:
            return None
        identity = short_identity(fields, self.options.identity_chars)
        if not identity.from_card:
            log.warning(
                "identity_summary_missing",
                session_id=self.assets.session_id,
                character_id=self.binding.character_id,
                hint="set the card's extensions.agentTavern.identitySummary",
            )
        return identity

    async def _user(self) -> Persona | None:
        try:
            fields = await self.assets.persona(self.options.identity_chars)
        except AssetsUnavailable as exc:
            log.warning("persona_unavailable", session_id=self.assets.session_id, error=str(exc))
            return None
        return user_persona(fields, self.options.identity_chars) if fields else None
