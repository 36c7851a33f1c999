"""The health endpoint's answers, without a socket; DSN redaction."""

from __future__ import annotations

import json

from tavern_runtime import pg
from tavern_runtime.health import HealthServer, NotReady


async def _ok() -> None:
    return None


async def _down() -> None:
    raise NotReady("Postgres: ConnectionRefusedError")


async def _metrics() -> str:
    return "tavern_up 1\n"


def _server(**checks) -> HealthServer:  # type: ignore[no-untyped-def]
    return HealthServer("ledger", "127.0.0.1", 0, checks, _metrics)


async def test_healthz_answers_while_starting() -> None:
    response = await _server(nats=_ok).respond("GET", "/healthz")
    assert response.status == 200


async def test_readyz_is_503_until_the_service_runs() -> None:
    response = await _server(nats=_ok).respond("GET", "/readyz")
    assert response.status == 503
    assert json.loads(response.body)["status"] == "starting"


async def test_readyz_is_200_when_every_check_passes() -> None:
    server = _server(nats=_ok, postgres=_ok)
    server.phase = "running"
    response = await server.respond("GET", "/readyz")
    assert response.status == 200
    assert json.loads(response.body)["checks"] == {"nats": "ok", "postgres": "ok"}


async def test_readyz_is_503_with_the_reason_of_a_failing_check() -> None:
    server = _server(nats=_ok, postgres=_down)
    server.phase = "running"
    response = await server.respond("GET", "/readyz?verbose=1")
    body = json.loads(response.body)
    assert response.status == 503
    assert body["checks"]["postgres"] == "Postgres: ConnectionRefusedError"


async def test_metrics_are_prometheus_text() -> None:
    response = await _server().respond("GET", "/metrics")
    assert response.content_type.startswith("text/plain; version=0.0.4")
    assert response.body == "tavern_up 1\n"


async def test_unknown_path_and_method_are_refused() -> None:
    assert (await _server().respond("GET", "/nope")).status == 404
    assert (await _server().respond("POST", "/healthz")).status == 405


def test_head_response_has_headers_only() -> None:
    from tavern_runtime.health import Response

    raw = Response(200, '{"a": 1}').encode(head_only=True)
    assert raw.endswith(b"\r\n\r\n")
    assert b"Content-Length: 8" in raw


def test_dsn_is_described_without_its_password() -> None:
    dsn = "postgresql://tavern:s3cr%40t@db.internal:6543/tavern"
    assert pg.describe_dsn(dsn) == "tavern@db.internal:6543/tavern"
    assert "s3cr" not in pg.redact("auth failed for s3cr@t and s3cr%40t", dsn)


def test_a_unix_socket_dsn_is_described_by_its_directory() -> None:
    dsn = "postgresql://tavern:s3cret@/tavern?host=/srv/my%20data/pgdata&port=6543"
    assert pg.describe_dsn(dsn) == "tavern@/srv/my data/pgdata:6543/tavern"


def test_another_database_on_the_same_server_keeps_the_socket_and_the_login() -> None:
    socket = "postgresql://tavern:s3cret@/tavern?host=/srv/pgdata&port=6543"
    assert (
        pg.with_database(socket, "t_1")
        == "postgresql://tavern:s3cret@/t_1?host=/srv/pgdata&port=6543"
    )
    tcp = "postgresql://tavern:s3cret@db.internal:6543/tavern"
    assert pg.with_database(tcp, "t_1") == "postgresql://tavern:s3cret@db.internal:6543/t_1"
