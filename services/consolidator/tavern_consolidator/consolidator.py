"""What the handlers call: the consolidator's use cases wired to one pool, the bus and the model
router. Built by `build_app` (nothing opens here); the pool arrives with the lifespan, the
consumers and the background worker start after the broker connected."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from faststream.nats import NatsBroker
from nats.aio.msg import Msg
from nats.js import JetStreamContext

from tavern_consolidator.access import Access
from tavern_consolidator.config import ConsolidatorSettings
from tavern_consolidator.distillation import Distillation, Retry
from tavern_consolidator.domain import policy, throttle
from tavern_consolidator.dreaming import Dreaming
from tavern_consolidator.errors import StoreUnavailable
from tavern_consolidator.expression import Expression
from tavern_consolidator.feedback import Feedback, FeedbackConfig
from tavern_consolidator.intake import Intake, Touched
from tavern_consolidator.judge import Judge
from tavern_consolidator.ledger_client import LedgerClient
from tavern_consolidator.model import Model
from tavern_consolidator.profiles import Profiles
from tavern_consolidator.scheduler import Scheduler
from tavern_consolidator.store import batches, connection
from tavern_events.streams import LEDGER, SESSIONS
from tavern_llm import LLMConfig, build_router
from tavern_runtime import dlq, principals, tracing
from tavern_runtime.auth import Credentials
from tavern_runtime.batchconsumer import BatchConsumer
from tavern_runtime.errors import Forbidden
from tavern_runtime.logs import get_logger
from tavern_runtime.pg import Pool
from tavern_runtime.principals import Principal
from tavern_runtime.provision import ConsumerSpec
from tavern_runtime.service import ServiceResources

log = get_logger(__name__)

SERVICE = "consolidator"
CONSOLIDATOR_KEY = "consolidator"
"""Where the app puts its `Consolidator` in the FastStream context."""
LEDGER_DURABLE = "consolidator-ledger"
SESSIONS_DURABLE = "consolidator-sessions"
LEDGER_SUBJECTS = (
    "tavern.ledger.*.evidence.appended",
    "tavern.ledger.*.evidence.state-changed",
    "tavern.ledger.*.observation.upserted",
    "tavern.ledger.*.rule.changed",
)
SESSION_SUBJECTS = ("tavern.session.*.session.created", "tavern.session.*.turn.end")


def utc_now() -> datetime:
    return datetime.now(UTC)


def ledger_consumer() -> ConsumerSpec:
    return ConsumerSpec(
        name=LEDGER_DURABLE,
        stream=LEDGER.name,
        filter_subjects=LEDGER_SUBJECTS,
        max_deliver=100,  # poison is dead-lettered at once; retries are for outages
        ack_wait_s=60.0,
        max_ack_pending=10_000,
        description="Consolidator: copies of evidence, observations and rules.",
    )


def sessions_consumer() -> ConsumerSpec:
    return ConsumerSpec(
        name=SESSIONS_DURABLE,
        stream=SESSIONS.name,
        filter_subjects=SESSION_SUBJECTS,
        max_deliver=100,
        ack_wait_s=60.0,
        max_ack_pending=10_000,
        description="Consolidator: session scopes and ended turns (the turn counter).",
    )


def policy_config(s: ConsolidatorSettings) -> policy.PolicyConfig:
    return policy.PolicyConfig(
        min_events=s.consolidator_policy_min_events,
        min_strong=s.consolidator_policy_min_strong,
        max_age_days=s.consolidator_policy_max_age_days,
        auto_promote=s.consolidator_auto_promote,
    )


def thresholds(s: ConsolidatorSettings) -> throttle.Thresholds:
    return throttle.Thresholds(
        s.consolidator_min_evidence,
        s.consolidator_min_turns,
        s.consolidator_max_batch,
        s.consolidator_daily_runs,
    )


CONSOLIDATOR = principals.service("consolidator")
"""Who the consolidator is on the bus: a service acting on its own account."""


class Consolidator:
    def __init__(
        self,
        settings: ConsolidatorSettings,
        resources: ServiceResources,
        broker: NatsBroker,
        llm: LLMConfig,
    ) -> None:
        self.settings, self._resources, self._broker = settings, resources, broker
        self._llm = llm.model_copy(update={"max_retries": settings.consolidator_llm_retries})
        self._model: Model | None = None
        self._js: JetStreamContext | None = None
        credentials = Credentials.of(settings)
        self.access = Access(credentials)
        self._credentials = credentials
        self.ledger = LedgerClient(
            lambda: broker.connection, headers=lambda: credentials.headers(CONSOLIDATOR)
        )
        judging = settings.consolidator_judge_claims and bool(self._llm.base_url)
        self.intake = Intake(self.pool, self._dead_letter, judging)
        self.judge = Judge(self.pool, self.model, self.ledger)
        retry = Retry(settings.consolidator_retry_base_s, settings.consolidator_retry_max_s)
        self.distillation = Distillation(
            self.pool, self.model, self.ledger, thresholds(settings), retry, utc_now
        )
        feedback = FeedbackConfig(
            settings.consolidator_rule_daily_runs,
            settings.consolidator_rule_window_days,
            settings.consolidator_rule_overlap,
            settings.consolidator_rules_dir,
        )
        self.feedback = Feedback(self.pool, self.ledger, feedback, utc_now)
        self.expression = Expression(self.pool, self.ledger, policy_config(settings), utc_now)
        self.distillation.on_style = self.expression.consider
        self.dreaming = Dreaming(self.pool, settings.consolidator_dream_archive_days, utc_now)
        self.profiles = Profiles(self.pool)
        jobs = {
            "distil": self._distil,
            "rules": self.feedback.draft,
            "views": self._views,
            "judge": self._judge,
        }
        self.scheduler = Scheduler(
            jobs, self._sweep, settings.consolidator_poll_s, settings.consolidator_coalesce_s
        )
        batch, wait = settings.consolidator_consumer_batch, settings.consolidator_consumer_wait_s
        self.consumers = (
            BatchConsumer(
                ledger_consumer(),
                self._ledger_facts,
                batch=batch,
                wait_s=wait,
                dead_letters_as=SERVICE,
            ),
            BatchConsumer(
                sessions_consumer(),
                self._session_events,
                batch=batch,
                wait_s=wait,
                dead_letters_as=SERVICE,
            ),
        )

    # --- lifecycle ------------------------------------------------------------------------

    async def start(self) -> None:
        """After the broker connected: the model router, consumers, worker, DLQ watchers."""
        self._model = Model(
            build_router(self._llm),
            self.settings.consolidator_max_tokens,
            self.settings.consolidator_timeout_s,
        )
        for consumer in self.consumers:
            consumer.start(self._broker.connection, self.js())
        self.scheduler.start()
        if self.settings.consolidator_rules_dir is not None:
            self.scheduler.wake("views", ["*"])

    async def stop(self) -> None:
        """Before the broker closes: stop taking messages, then the worker (within grace)."""
        grace = self.settings.shutdown_grace_s
        for consumer in self.consumers:
            await consumer.stop(grace / 2)
        await self.scheduler.stop(grace / 2)
        if self._model is not None:
            await self._model.aclose()

    async def owns(self, who: Principal, scope_id: str) -> None:
        """`Forbidden` unless the ledger says `who`'s user owns `scope_id`."""
        acting = CONSOLIDATOR.acting_for(who.user or "")
        if not await self.ledger.owned(scope_id, self._credentials.headers(acting)):
            raise Forbidden(f"{who.label} may not act on scope {scope_id!r}: it is not theirs")

    def pool(self) -> Pool:
        if self._resources.pool is None:
            raise StoreUnavailable("the consolidator's database pool is not open")
        return self._resources.pool

    def js(self) -> JetStreamContext:
        if self._js is None:
            self._js = self._broker.connection.jetstream(timeout=5.0)
        return self._js

    def model(self) -> Model:
        if self._model is None:
            raise StoreUnavailable("the model router is not started")
        return self._model

    # --- consumers and jobs ----------------------------------------------------------------

    async def _ledger_facts(self, msgs: Sequence[Msg]) -> None:
        self._woken(await self.intake.ledger_facts(msgs))

    async def _session_events(self, msgs: Sequence[Msg]) -> None:
        with tracing.consumed("consolidator.intake", (m.headers for m in msgs)):
            self._woken(await self.intake.session_events(msgs))

    def _woken(self, touched: Touched) -> None:
        self.scheduler.wake("distil", touched.distil)
        self.scheduler.wake("rules", touched.rules)
        self.scheduler.wake("judge", touched.judge)

    async def _distil(self, scope_id: str) -> dict[str, Any]:
        result = await self.distillation.run(scope_id)
        if result.get("digested"):  # there may be more than one batch of backlog
            self.scheduler.wake("distil", [scope_id])
        return result

    async def _judge(self, scope_id: str) -> dict[str, Any]:
        result = await self.judge.run(scope_id)
        if result.get("more"):
            self.scheduler.wake("judge", [scope_id])
        return result

    async def _views(self, _: str) -> dict[str, Any]:
        return await self.feedback.rebuild(None)

    async def _sweep(self, everything: bool) -> list[str]:
        async with connection(self.pool) as conn:
            return await batches.sweep(conn, self.settings.consolidator_daily_runs, everything)

    async def _dead_letter(self, msg: Msg, error: Exception) -> None:
        consumer = LEDGER_DURABLE if msg.subject.startswith("tavern.ledger.") else SESSIONS_DURABLE
        await dlq.dead_letter(
            self.js(), msg, service=SERVICE, consumer=consumer, reason=str(error), error=error
        )

    # --- reads -----------------------------------------------------------------------------

    async def status(self, scope_id: str) -> dict[str, Any]:
        async with connection(self.pool) as conn:
            state = await batches.scope_state(conn, scope_id)
            undigested, turns = await batches.counts(conn, state)
            found = await batches.status(conn, scope_id)
        return {"scope_id": scope_id, "undigested": undigested, "turns": turns, **found}

    async def explain(self, evidence_id: str) -> dict[str, Any]:
        """Was this evidence digested, is it pending, or was it skipped (and why)?"""
        async with connection(self.pool) as conn:
            found = await batches.position(conn, evidence_id)
            used = await batches.batches_with(conn, evidence_id)
        digested = any(b["status"] == "ok" for b in used)
        verdict = throttle.verdict(found, digested=digested) if found else "unknown"
        return {"evidence_id": evidence_id, "verdict": verdict, "batches": used}
