"""`tavern status` is green only when every server, stream and service is."""

from __future__ import annotations

from tavern_cli.commands.status import Report, render
from tavern_cli.probes import Check, ConsumerRow, NatsState, ServiceRow, StreamRow


def _report(*, stream_ok: bool = True, service_ok: bool = True, pg_ok: bool = True) -> Report:
    nats = NatsState(
        Check("NATS", True, "nats://127.0.0.1:4222"),
        [StreamRow("SESSIONS", stream_ok, 3, 1024, 1)],
        [ConsumerRow("SESSIONS", "projector", 0, 0, 0, 1)],
    )
    services = [ServiceRow("ledger", service_ok, "v0.1.0", "ready")]
    return Report([nats.server, Check("Postgres", pg_ok, "h:5432/t")], nats, services)


def test_all_green() -> None:
    assert _report().ok


def test_missing_stream_is_not_green() -> None:
    assert not _report(stream_ok=False).ok


def test_unhealthy_service_is_not_green() -> None:
    assert not _report(service_ok=False).ok


def test_unreachable_postgres_is_not_green() -> None:
    assert not _report(pg_ok=False).ok


def test_unreachable_nats_renders_without_stream_tables() -> None:
    report = Report([Check("NATS", False, "cannot reach NATS")], None, [])
    assert not report.ok
    assert [t.title for t in render(report)] == ["Servers", "Services"]


def test_render_has_all_four_tables() -> None:
    titles = [t.title for t in render(_report())]
    assert titles == ["Servers", "Streams", "Consumers", "Services"]
