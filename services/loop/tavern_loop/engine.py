"""The loop engine of one replica: dispatcher, session runners, leases and their dependencies.

Built from settings by the app's lifespan; `start()` connects and begins dispatching, `stop()`
lets running turns finish within the grace period, then releases their leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from nats.errors import NoRespondersError
from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import BucketNotFoundError, NotFoundError
from nats.js.kv import KeyValue

from tavern_events.ids import new_id
from tavern_events.replies import error_reply, timeout_headers
from tavern_llm.config import LLMConfig
from tavern_llm.router import ProviderRouter, build_router
from tavern_loop.config import LoopSettings, loop_options
from tavern_loop.dispatch import DURABLE, Dispatcher
from tavern_loop.domain.guard import RepeatGuard
from tavern_loop.lease import Leases
from tavern_loop.logcache import LogCache
from tavern_loop.options import LoopOptions
from tavern_loop.recall import RecallClient
from tavern_loop.runner import SessionRunner
from tavern_loop.slots import TurnSlots
from tavern_loop.tools.base import Tool, ToolRegistry
from tavern_loop.tools.bounds import SpillPolicy
from tavern_loop.tools.builtin import builtin_tools
from tavern_loop.tools.pipeline import ToolPipeline
from tavern_loop.tools.policy import authorise, profile_tools
from tavern_loop.tools.spillstore import SpillStore
from tavern_loop.turn import LoopDeps
from tavern_runtime import tracing
from tavern_runtime.auth import Credentials
from tavern_runtime.bus import NatsConnection, connect
from tavern_runtime.logs import get_logger
from tavern_runtime.provision import LEASES
from tavern_runtime.sessionlog import SessionLogWriter
from tavern_runtime.settings import TavernSettings

log = get_logger(__name__)


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class EngineParts:
    """What differs between production and tests: options, tools, the model router."""

    options: LoopOptions
    router: ProviderRouter
    tools: list[Tool]


def default_parts(settings: TavernSettings, options: LoopOptions | None = None) -> EngineParts:
    """The service's parts: options from `TAVERN_LOOP_*`, the LLM routes, every tool."""
    if options is None:
        options = loop_options(settings) if isinstance(settings, LoopSettings) else LoopOptions()
    tools = [*builtin_tools(), *profile_tools(options.profiles)]
    return EngineParts(options, build_router(LLMConfig()), tools)


class LoopEngine:
    def __init__(self, settings: TavernSettings, parts: EngineParts, name: str = "loop") -> None:
        self.settings, self.parts = settings, parts
        self.holder = f"{socket.gethostname()}-{os.getpid()}-{new_id()[-8:]}"
        self.runners: dict[str, SessionRunner] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._conn: NatsConnection | None = None
        self._dispatcher: Dispatcher | None = None
        self._dispatch_task: asyncio.Task[None] | None = None
        self._registry = ToolRegistry(list(parts.tools))
        self._spill: SpillPolicy | None = None
        self._name = name
        self._credentials = Credentials.of(settings)

    async def start(self) -> None:
        """Connect and dispatch; until provisioning has run, wait for it in the background
        (readiness reports what is missing) instead of failing the service. Without an auth
        key it fails: it could take no input."""
        self._credentials.ensure()
        self._conn = conn = await connect(self.settings, f"{self._name}-engine")
        try:
            kv = await self._provisioned(conn)
        except (BucketNotFoundError, NotFoundError):
            self._dispatch_task = asyncio.create_task(self._when_provisioned(conn), name="loop")
            return
        await self._setup(conn, kv)
        self._dispatch_task = asyncio.create_task(self._dispatch(), name="loop-dispatch")

    async def _provisioned(self, conn: NatsConnection) -> KeyValue:
        kv = await conn.js.key_value(LEASES.name)
        await conn.js.consumer_info("INPUTS", DURABLE)
        return kv

    async def _when_provisioned(self, conn: NatsConnection) -> None:
        delay = 0.5
        while True:
            log.warning("loop_waiting_for_provisioning", retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 5.0)
            try:
                kv = await self._provisioned(conn)
            except (BucketNotFoundError, NotFoundError):
                continue
            await self._setup(conn, kv)
            await self._dispatch()
            return

    async def _setup(self, conn: NatsConnection, kv: KeyValue) -> None:
        self.leases = Leases(kv, self.holder)
        await self._match_lease_ttl(kv)
        self.writer = SessionLogWriter(conn.nc, replicas=self.settings.stream_replicas)
        self.deps = self._deps(conn)
        self._dispatcher = Dispatcher(conn.nc, self.leases, self._start_runner, self.runners)
        log.info("loop_engine_started", holder=self.holder)

    async def _dispatch(self) -> None:
        assert self._dispatcher is not None
        await self._dispatcher.run()

    async def _match_lease_ttl(self, kv: KeyValue) -> None:
        """Leases expire after the bucket's max age, whatever the options say: renew (every
        third of the TTL) against the shorter of the two, or a held lease would lapse."""
        bucket_ttl = (await kv.status()).ttl
        options = self.parts.options
        if bucket_ttl and bucket_ttl < options.lease_ttl_s:
            log.warning(
                "lease_ttl_shortened", configured_s=options.lease_ttl_s, bucket_s=bucket_ttl
            )
            self.parts = replace(self.parts, options=replace(options, lease_ttl_s=bucket_ttl))

    def _deps(self, conn: NatsConnection) -> LoopDeps:
        options = self.parts.options
        spill_root = Path(self.settings.data_dir) / "spill"
        store = SpillStore(spill_root)
        self._spill = (
            SpillPolicy(store, options.spill_max_inline_bytes)
            if options.spill_max_inline_bytes is not None
            else None
        )
        recall = RecallClient(conn.nc, options.recall_timeout_s) if options.recall else None
        return LoopDeps(
            self.parts.router,
            self._pipeline(),
            conn.js,
            self._rpc,
            options,
            utc_now,
            new_id,
            recall,
            store,
            logs=LogCache(options.log_cache_events),
            credentials=self._credentials,
            slots=TurnSlots(options.turn_slots),
        )

    def _pipeline(self) -> ToolPipeline:
        """A pipeline per session runner: the repeat guard's chains (keyed by agent id) are
        the session's own and go away with the runner, instead of mixing every session's
        `main` agent in one chain."""
        config = self.parts.options.guard
        guard = RepeatGuard(config) if config is not None else None
        return ToolPipeline(self._registry, guard=guard, spill=self._spill, authorise=authorise)

    async def _rpc(
        self,
        subject: str,
        payload: dict[str, Any],
        timeout: float,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        assert self._conn is not None
        try:
            reply = await self._conn.nc.request(
                subject,
                json.dumps(payload).encode(),
                timeout=timeout,
                headers=tracing.inject({**timeout_headers(timeout), **(headers or {})}),
            )
        except NoRespondersError:
            return error_reply("unavailable", f"no service answers {subject}")
        except NatsTimeout:
            return error_reply("timeout", f"{subject} did not answer in time")
        body: dict[str, Any] = json.loads(reply.data or b"{}")
        return body

    def _start_runner(self, session_id: str) -> None:
        if session_id in self._tasks:
            return
        task = asyncio.create_task(self._run_session(session_id), name=f"session-{session_id}")
        self._tasks[session_id] = task

    async def _run_session(self, session_id: str) -> None:
        try:
            lease = await self.leases.acquire(session_id)
            if lease is None:
                return
            assert self._conn is not None
            deps = replace(self.deps, pipeline=self._pipeline())
            runner = SessionRunner(session_id, lease, self.leases, self._conn.nc, deps, self.writer)
            self.runners[session_id] = runner
            await runner.run()
        except Exception:
            log.exception("session_runner_failed", session_id=session_id)
        finally:
            self.runners.pop(session_id, None)
            self._tasks.pop(session_id, None)

    async def stop(self, grace_s: float = 15.0) -> None:
        if getattr(self, "deps", None) is not None:
            self.deps.stopping.set()  # runners finish their turn and take no new one
        if self._dispatcher is not None:
            await self._dispatcher.stop()
        if self._dispatch_task is not None:
            self._dispatch_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._dispatch_task
        pending = list(self._tasks.values())
        if pending:
            _, late = await asyncio.wait(pending, timeout=grace_s)
            for task in late:
                task.cancel()
            await asyncio.gather(*late, return_exceptions=True)
        await self.parts.router.aclose()
        if self._conn is not None:
            await self._conn.close()
        log.info("loop_engine_stopped", holder=self.holder)
