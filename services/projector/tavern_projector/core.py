"""What the projector's handlers share: settings, the pool, the broker's JetStream context,
and one live runner per projection."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from nats.aio.subscription import Subscription
from nats.js import JetStreamContext

from tavern_projector import catalog
from tavern_projector.config import ProjectorSettings
from tavern_projector.consumer import PullLoop
from tavern_projector.framework import Target, checkpoints
from tavern_projector.projections.chat import Names
from tavern_projector.replays import Replays
from tavern_projector.runner import SERVICE, LiveRunner
from tavern_runtime import dlq
from tavern_runtime.auth import Credentials
from tavern_runtime.errors import TransientError
from tavern_runtime.service import ServiceResources


def options_of(settings: ProjectorSettings) -> catalog.Options:
    names = Names(settings.projector_character_name, settings.projector_user_name)
    return catalog.Options(Target(settings.chats_dir), settings.tz, names)


class Core:
    def __init__(self, settings: ProjectorSettings, resources: ServiceResources) -> None:
        self.settings, self.resources = settings, resources
        self.options = options_of(settings)
        self.credentials = Credentials.of(settings)
        """Checks the principal of every RPC (the key is read when the service starts)."""
        self.broker: Any = None
        self.watchers: list[Subscription] = []
        self.runners = [
            LiveRunner(
                catalog.build(name, self.options),
                catalog.consumer_name(name),
                self.pool,
                self.js,
                self.options.live,
            )
            for name in catalog.NAMES
        ]
        self.loops: list[PullLoop] = []
        self.replays = Replays(self)
        """Replays asked over the bus, run in this process."""

    def consume(self, runner: LiveRunner) -> None:
        """Feed `runner` from its projection's durable consumer, in order, once started."""
        spec = catalog.consumer(runner.projection)
        settings = self.settings
        self.loops.append(
            PullLoop(
                runner,
                spec,
                self.js,
                batch=settings.projector_batch_size,
                gather_s=settings.projector_gather_s,
                busy_gather_s=settings.projector_busy_gather_s,
            )
        )

    async def start_consumers(self) -> None:
        """After the broker connected: start pulling for every projection, and dead-letter
        what a consumer gave up on (the server's MAX_DELIVERIES advisories). Without an auth
        key the service stops here: it could answer no request."""
        self.credentials.ensure()
        for loop in self.loops:
            await loop.start()
        connection = getattr(self.broker, "_connection", None)
        js = self.js()
        if connection is None or js is None:
            return
        for loop in self.loops:
            self.watchers.append(
                await dlq.watch_max_deliveries(
                    connection,
                    js,
                    service=SERVICE,
                    stream=loop.spec.stream,
                    consumer=loop.spec.name,
                )
            )

    async def stop_consumers(self) -> None:
        """Before the broker stops: finish the batches in hand (and end running replays)."""
        await self.replays.stop()
        for watcher in self.watchers:
            with contextlib.suppress(Exception):
                await watcher.unsubscribe()
        await asyncio.gather(*(loop.stop(self.settings.shutdown_grace_s) for loop in self.loops))

    async def status(self, _: Any = None) -> dict[str, Any]:
        """Per projection: code version, stored checkpoint, consumer lag, what this process did."""
        stored = await checkpoints(self.pool())
        js = self.js()
        rows = []
        for runner in self.runners:
            projection, mark = runner.projection, stored.get(runner.projection.name)
            rows.append(
                {
                    "projection": projection.name,
                    "consumer": runner.consumer,
                    "version": projection.version,
                    "stored_version": mark.version if mark else None,
                    "checkpoint": mark.stream_seq if mark else 0,
                    "applied": runner.applied,
                    "gaps_filled": runner.gaps_filled,
                    **(await _lag(js, projection.stream, runner.consumer)),
                }
            )
        return {"projections": rows}

    def pool(self) -> Any:
        if self.resources.pool is None:
            raise TransientError("the Postgres pool is not open yet")
        return self.resources.pool

    def js(self) -> JetStreamContext | None:
        connection = getattr(self.broker, "_connection", None)
        return connection.jetstream(timeout=5) if connection is not None else None


async def _lag(js: JetStreamContext | None, stream: str, consumer: str) -> dict[str, Any]:
    if js is None:
        return {"pending": None, "ack_pending": None}
    try:
        info = await js.consumer_info(stream, consumer, timeout=2)
    except Exception:  # a missing consumer shows as unknown lag
        return {"pending": None, "ack_pending": None}
    return {
        "pending": int(info.num_pending or 0),
        "ack_pending": int(info.num_ack_pending or 0),
        "redelivered": int(info.num_redelivered or 0),
    }
