"""One idempotent provisioning step for JetStream: streams, durable consumers and KV buckets.

Creates what is missing and leaves what matches. A live resource that differs from its spec is
reported as drift and rewritten only on `apply_drift=True` (and only where the server allows).
A durable whose config was changed behind provisioning's back (a filter that matched nothing,
say) has passed over what it should have delivered: once its config is put back, it is reset
to replay from its reader's checkpoint (`replay_from`), which is safe because its reader
applies each message idempotently.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from enum import Enum
from typing import Any, TypeVar

from nats.errors import TimeoutError as NatsTimeout
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    KeyValueConfig,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import APIError, NotFoundError

from tavern_events import streams
from tavern_events.streams import StreamSpec
from tavern_runtime.errors import ConfigurationError
from tavern_runtime.logs import get_logger

log = get_logger(__name__)

Config = TypeVar("Config", StreamConfig, ConsumerConfig)
Made = TypeVar("Made")
ReplayFrom = Callable[["ConsumerSpec"], Awaitable["int | None"]]
"""The stream sequence a durable's reader wants delivered next after a repair (its
checkpoint + 1), None when no checkpoint is known."""

CREATE_ATTEMPTS = 3
"""A cluster that has just elected its meta leader may still be settling its routes: the reply
to a creation can be lost on a route closed as a duplicate (seen: the stream made, its leader
elected, no reply within the request's timeout). Creating with the same config again is a
no-op once the resource exists, so a lost reply is asked again."""

# field -> may provisioning rewrite it on a live resource? (The server may still refuse.)
STREAM_FIELDS: Mapping[str, bool] = {
    "description": True,
    "subjects": True,
    "retention": False,  # limits -> interest would delete acknowledged history
    "storage": False,
    "num_replicas": True,
    "max_age": True,
    "duplicate_window": True,
    "discard": True,
    "allow_direct": True,
    "allow_atomic": True,
    "deny_delete": True,
}
CONSUMER_FIELDS: Mapping[str, bool] = {
    "description": True,
    "filter_subjects": True,
    "ack_policy": False,
    "deliver_policy": False,
    "max_deliver": True,
    "ack_wait": True,
    "backoff": True,
    "max_ack_pending": True,
}
BUCKET_FIELDS: Mapping[str, bool] = {
    "description": True,
    "max_age": True,
    "max_msgs_per_subject": True,
    "num_replicas": True,
    "storage": False,
    "allow_direct": True,
}


@dataclass(frozen=True)
class ConsumerSpec:
    """A durable pull consumer. With `backoff_s`, the server uses its first step as ack wait."""

    name: str
    stream: str
    filter_subjects: tuple[str, ...]
    max_deliver: int = 5
    ack_wait_s: float = 30.0
    backoff_s: tuple[float, ...] = ()
    max_ack_pending: int = 1000
    deliver_policy: DeliverPolicy = DeliverPolicy.ALL
    description: str = ""
    passes_over: bool = False
    """Its reader passes over messages it does not apply: provisioning sets its filters
    without `apply_drift` (an older, narrower filter only hands it less)."""

    def __post_init__(self) -> None:
        if self.max_deliver < 1 or len(self.backoff_s) >= self.max_deliver:
            raise ConfigurationError(
                f"consumer {self.name}: max_deliver must be >= 1 and > len(backoff)"
            )

    def config(self) -> ConsumerConfig:
        return ConsumerConfig(
            name=self.name,
            durable_name=self.name,
            description=self.description or None,
            filter_subjects=list(self.filter_subjects),
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=self.deliver_policy,
            max_deliver=self.max_deliver,
            ack_wait=self.backoff_s[0] if self.backoff_s else self.ack_wait_s,
            backoff=list(self.backoff_s) or None,
            max_ack_pending=self.max_ack_pending,
        )


@dataclass(frozen=True)
class BucketSpec:
    """A KV bucket; `ttl_s` is the age after which an entry disappears (0 = never)."""

    name: str
    ttl_s: float = 0.0
    history: int = 1
    description: str = ""

    @property
    def stream_name(self) -> str:
        return f"KV_{self.name}"

    def config(self, replicas: int) -> KeyValueConfig:
        return KeyValueConfig(
            bucket=self.name,
            description=self.description or None,
            ttl=self.ttl_s or None,
            history=self.history,
            replicas=replicas,
            storage=StorageType.FILE,
            direct=True,
        )

    def stream_config(self, replicas: int) -> StreamConfig:
        """The parts of the bucket's backing stream that this spec decides."""
        return StreamConfig(
            name=self.stream_name,
            description=self.description or None,
            max_age=self.ttl_s,
            max_msgs_per_subject=self.history,
            num_replicas=replicas,
            storage=StorageType.FILE,
            allow_direct=True,
        )


LEASES = BucketSpec(
    "tavern_leases",
    ttl_s=10.0,
    description="Session leases: the loop replica that holds a key runs that session.",
)
BUCKETS: tuple[BucketSpec, ...] = (LEASES,)


@dataclass(frozen=True)
class Drift:
    """One field of a live resource that differs from its spec."""

    resource: str
    field: str
    expected: object
    actual: object
    mutable: bool

    def __str__(self) -> str:
        fixed = "" if self.mutable else " (immutable: recreate)"
        values = f"expected {self.expected!r}, actual {self.actual!r}"
        return f"{self.resource}: {self.field} {values}{fixed}"


@dataclass
class ProvisionReport:
    """What one provisioning run did; `ok` is false while drift or a refusal remains."""

    created: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    drifted: list[Drift] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)
    """Repaired durables reset to their reader's checkpoint, or told why not."""

    @property
    def ok(self) -> bool:
        return not self.drifted and not self.refused

    def lines(self) -> list[str]:
        """One line per resource or drift, for the CLI."""
        rows = [f"created    {r}" for r in self.created]
        rows += [f"unchanged  {r}" for r in self.unchanged]
        rows += [f"updated    {r}" for r in self.updated]
        rows += [f"replayed   {r}" for r in self.replayed]
        rows += [f"drift      {d}" for d in self.drifted]
        rows += [f"refused    {r}" for r in self.refused]
        return rows


# --- pure: expected configs and drift ------------------------------------------------------------


def stream_config(spec: StreamSpec, replicas: int | None = None) -> StreamConfig:
    """The server config of a contract stream: file storage, limits retention, kept forever."""
    config = StreamConfig(
        name=spec.name,
        description=spec.description,
        subjects=list(spec.subjects),
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        num_replicas=replicas or spec.replicas,
        max_age=spec.max_age_s,
        duplicate_window=spec.duplicate_window_s,
        discard=DiscardPolicy.OLD,
        allow_direct=spec.allow_direct,
        allow_atomic=spec.allow_atomic,
        deny_delete=spec.deny_delete,
    )
    return config.evolve(**spec.extra)


def stream_fields(spec: StreamSpec) -> dict[str, bool]:
    return {**STREAM_FIELDS, **dict.fromkeys(spec.extra, True)}


def _norm(name: str, value: object) -> object:
    """Compare like the server stores: absent flags are false, lists are unordered sets."""
    if value is None and name.startswith(("allow_", "deny_")):
        return False
    if isinstance(value, Enum):
        return value.value
    if name in ("subjects", "filter_subjects") and isinstance(value, list | tuple):
        return tuple(sorted(value))
    if isinstance(value, list):
        return tuple(float(v) for v in value)
    if isinstance(value, float | int) and not isinstance(value, bool):
        return float(value)
    return value


def _actual(name: str, actual: object) -> object:
    value = getattr(actual, name, None)
    if name == "filter_subjects" and not value:
        single = getattr(actual, "filter_subject", None)
        return [single] if single else None
    return value


def compare(
    resource: str, managed: Mapping[str, bool], expected: object, actual: object
) -> list[Drift]:
    """Every managed field whose value differs between `expected` and `actual`."""
    drifts = []
    for name, mutable in managed.items():
        want = _norm(name, getattr(expected, name, None))
        have = _norm(name, _actual(name, actual))
        if want != have:
            drifts.append(Drift(resource, name, want, have, mutable))
    return drifts


TURNED_ON_WITHOUT_ASKING = frozenset({"allow_batched"})
"""Stream flags that only let a writer publish in another way, changing nothing stored and
nothing an older writer does: provisioning turns them on (never off) without `apply_drift`, so
that an existing deployment gets them with its next `tavern up` or `tavern init`."""


def turns_on(drift: Drift) -> bool:
    """Whether `drift` is a flag provisioning turns on without being asked."""
    return drift.field in TURNED_ON_WITHOUT_ASKING and drift.expected is True and drift.mutable


def widens(drift: Drift, spec: ConsumerSpec) -> bool:
    """Whether `drift` is a filter provisioning sets without being asked (`passes_over`)."""
    return spec.passes_over and drift.field == "filter_subjects" and drift.mutable


def with_fixes(actual: Config, expected: Config, drifts: Iterable[Drift]) -> Config:
    """`actual` with every mutable drifted field set to its expected value."""
    changes = {d.field: getattr(expected, d.field) for d in drifts if d.mutable}
    if "filter_subjects" in changes and isinstance(actual, ConsumerConfig):
        changes["filter_subject"] = None
    known = {f.name for f in fields(actual)}
    return replace(actual, **{k: v for k, v in changes.items() if k in known})


# --- IO -------------------------------------------------------------------------------------------


async def provision(
    js: JetStreamContext,
    *,
    stream_specs: Sequence[StreamSpec] = streams.ALL,
    consumers: Sequence[ConsumerSpec] = (),
    buckets: Sequence[BucketSpec] = BUCKETS,
    replicas: int | None = None,
    apply_drift: bool = False,
    replay_from: ReplayFrom | None = None,
) -> ProvisionReport:
    """Create missing streams, consumers and buckets; report (or, if asked, fix) drift. A
    durable whose drift is fixed replays from `replay_from` (nothing without it)."""
    from tavern_runtime.bus import require_server_version

    require_server_version(js._nc)
    report = ProvisionReport()
    for spec in stream_specs:
        await _stream(js, spec, replicas, apply_drift, report)
    for consumer in consumers:
        await _consumer(js, consumer, apply_drift, report, replay_from)
    for bucket in buckets:
        await _bucket(js, bucket, replicas or 1, apply_drift, report)
    log.info("provisioned", **{k: len(v) for k, v in vars(report).items()})
    return report


async def _stream(
    js: JetStreamContext,
    spec: StreamSpec,
    replicas: int | None,
    apply: bool,
    report: ProvisionReport,
) -> None:
    resource, expected = f"stream {spec.name}", stream_config(spec, replicas)
    try:
        info = await js.stream_info(spec.name)
    except NotFoundError:
        await answered(resource, lambda: js.add_stream(expected))
        return _created(report, resource)
    drifts = compare(resource, stream_fields(spec), expected, info.config)
    unasked = [d for d in drifts if turns_on(d)]
    change = _Change(report, resource, info.config, expected, js.update_stream)
    await change.reconcile(drifts, unasked, apply)


@dataclass(frozen=True)
class _Change:
    """Bringing one live resource to its expected config; `write` stores a config."""

    report: ProvisionReport
    resource: str
    live: Any
    expected: Any
    write: Callable[[Any], Awaitable[Any]]

    async def reconcile(self, drifts: list[Drift], unasked: list[Drift], apply: bool) -> None:
        """Fix the `unasked` drifts at once, then report (or, with `apply`, fix) the rest."""
        live = self.live
        if unasked and not apply:
            changed = await self._unasked(unasked)
            if changed is not None:
                live, drifts = changed, [d for d in drifts if d not in unasked]
                if not drifts:
                    return
        fixed = with_fixes(live, self.expected, drifts)
        await _settle(self.report, self.resource, drifts, apply, lambda: self.write(fixed))

    async def _unasked(self, drifts: list[Drift]) -> Any:
        """The live config after fixing `drifts`, or None when the server refused (the
        drift is then reported as any other)."""
        try:
            info = await self.write(with_fixes(self.live, self.expected, drifts))
        except APIError as exc:
            log.error("resource_update_refused", resource=self.resource, error=exc.description)
            return None
        fields = [d.field for d in drifts]
        log.info("resource_updated_unasked", resource=self.resource, fields=fields)
        self.report.updated.append(self.resource)
        return info.config


async def _consumer(
    js: JetStreamContext,
    spec: ConsumerSpec,
    apply: bool,
    report: ProvisionReport,
    replay_from: ReplayFrom | None = None,
) -> None:
    resource, expected = f"consumer {spec.stream}/{spec.name}", spec.config()
    try:
        info = await js.consumer_info(spec.stream, spec.name)
    except NotFoundError:
        await answered(resource, lambda: js.add_consumer(spec.stream, expected))
        return _created(report, resource)
    drifts = compare(resource, CONSUMER_FIELDS, expected, info.config)
    unasked = [d for d in drifts if widens(d, spec)]
    write = functools.partial(js.add_consumer, spec.stream)
    await _Change(report, resource, info.config, expected, write).reconcile(drifts, unasked, apply)
    repaired = apply and resource in report.updated and any(d not in unasked for d in drifts)
    if repaired and replay_from is not None:
        await _replay(js, spec, await replay_from(spec), report)


async def _replay(
    js: JetStreamContext, spec: ConsumerSpec, seq: int | None, report: ProvisionReport
) -> None:
    """Deliver `spec`'s durable again from stream sequence `seq` (its reader's checkpoint + 1):
    what it passed over while its config was wrong reaches its reader after all."""
    resource = f"consumer {spec.stream}/{spec.name}"
    if seq is None:
        report.replayed.append(f"{resource}: no checkpoint known, not replayed")
        return
    try:
        await reset_consumer(js, spec.stream, spec.name, seq)
    except APIError as exc:
        log.error("consumer_reset_refused", resource=resource, error=exc.description)
        report.refused.append(f"{resource}: replay from {seq}: {exc.description}")
        return
    log.warning("consumer_replayed", resource=resource, from_seq=seq)
    report.replayed.append(f"{resource} from stream seq {seq}")


async def reset_consumer(js: JetStreamContext, stream: str, name: str, seq: int) -> int:
    """`$JS.API.CONSUMER.RESET.<stream>.<name>` (nats-server 2.14+): the durable delivers
    from stream sequence `seq` next, its pending and redelivery state dropped. The operator's
    alone (`tavern_cli.access.MANAGED`). Returns the sequence the server reset to."""
    subject = f"{js._prefix}.CONSUMER.RESET.{stream}.{name}"
    reply = await js._nc.request(subject, json.dumps({"seq": seq}).encode(), timeout=5)
    answer = json.loads(reply.data)
    if "error" in answer:
        APIError.from_error(answer["error"])  # raises the error's own class
    return int(answer.get("reset_seq", seq))


async def _bucket(
    js: JetStreamContext, spec: BucketSpec, replicas: int, apply: bool, report: ProvisionReport
) -> None:
    resource, expected = f"bucket {spec.name}", spec.stream_config(replicas)
    try:
        info = await js.stream_info(spec.stream_name)
    except NotFoundError:
        await answered(resource, lambda: js.create_key_value(spec.config(replicas)))
        return _created(report, resource)
    drifts = compare(resource, BUCKET_FIELDS, expected, info.config)
    fixed = with_fixes(info.config, expected, drifts)
    await _settle(report, resource, drifts, apply, lambda: js.update_stream(fixed))


async def answered(
    resource: str, create: Callable[[], Awaitable[Made]], attempts: int = CREATE_ATTEMPTS
) -> Made:
    """`create()`, asked again when its reply is lost; the last timeout is raised."""
    for attempt in range(1, attempts):
        try:
            return await create()
        except NatsTimeout:
            log.warning("resource_create_unanswered", resource=resource, attempt=attempt)
    return await create()


def _created(report: ProvisionReport, resource: str) -> None:
    log.info("resource_created", resource=resource)
    report.created.append(resource)


async def _settle(
    report: ProvisionReport,
    resource: str,
    drifts: list[Drift],
    apply: bool,
    update: Callable[[], Awaitable[Any]],
) -> None:
    if not drifts:
        report.unchanged.append(resource)
        return
    if apply and any(d.mutable for d in drifts):
        try:
            await update()
        except APIError as exc:
            log.error("resource_update_refused", resource=resource, error=exc.description)
            report.refused.append(f"{resource}: {exc.description}")
        else:
            log.warning("resource_updated", resource=resource, fields=[d.field for d in drifts])
            report.updated.append(resource)
            drifts = [d for d in drifts if not d.mutable]
    for drift in drifts:
        log.warning("resource_drift", resource=resource, field=drift.field)
    report.drifted.extend(drifts)


async def verify(
    js: JetStreamContext, spec: StreamSpec | ConsumerSpec, *, replicas: int | None = None
) -> list[Drift]:
    """For services that bind with `declare=False`: a missing resource raises
    `ConfigurationError`; drift is logged and returned, never rewritten."""
    try:
        drifts = await _live_drift(js, spec, replicas)
    except NotFoundError as exc:
        what = f"stream {spec.name}" if isinstance(spec, StreamSpec) else f"consumer {spec.name}"
        raise ConfigurationError(f"{what} does not exist: run `tavern init`") from exc
    for drift in drifts:
        log.error("resource_drift", resource=drift.resource, field=drift.field)
    return drifts


async def _live_drift(
    js: JetStreamContext, spec: StreamSpec | ConsumerSpec, replicas: int | None
) -> list[Drift]:
    if isinstance(spec, ConsumerSpec):
        info = await js.consumer_info(spec.stream, spec.name)
        return compare(
            f"consumer {spec.stream}/{spec.name}", CONSUMER_FIELDS, spec.config(), info.config
        )
    managed = stream_fields(spec)
    if replicas is None:  # a service may not know the deployment's replica count
        managed.pop("num_replicas")
    stream_info = await js.stream_info(spec.name)
    return compare(f"stream {spec.name}", managed, stream_config(spec), stream_info.config)


def durables_of(specs: Iterable[ConsumerSpec]) -> tuple[tuple[str, str], ...]:
    """(stream, consumer name) of each spec: what `/metrics` reports the lag of."""
    return tuple((spec.stream, spec.name) for spec in specs)
