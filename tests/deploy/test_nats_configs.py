"""deploy/nats/*.conf: each passes `nats-server -t`, writes are fsynced, the cluster configs are
symmetric, and no password is written in a file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tavern_cli import catalog
from tavern_runtime.embedded import EmbeddedNats
from tavern_runtime.sessionlog import BATCH_TIMEOUT_S
from tests.deploy import natsconf

NATS_DIR = natsconf.NATS_DIR
CONFIGS = sorted(p.name for p in NATS_DIR.glob("*.conf"))
ROUTES = {f"NATS_ROUTE_URL_{i}": f"nats-route://route:pw@nats-{i}:6222" for i in (1, 2, 3)}


def _text(name: str) -> str:
    return (NATS_DIR / name).read_text()


def _without_comments(text: str) -> str:
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


@pytest.mark.parametrize("name", CONFIGS)
def test_config_passes_nats_server_test(name: str) -> None:
    result = natsconf.validate(NATS_DIR / name, ROUTES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "is valid" in result.stdout + result.stderr


def test_the_expected_configs_exist() -> None:
    assert {"single.conf", "accounts.conf", *natsconf.CLUSTER_CONFIGS} <= set(CONFIGS)


@pytest.mark.parametrize("variable", sorted(natsconf.PASSWORDS))
def test_a_server_refuses_to_start_without_a_password(variable: str) -> None:
    config = "n1.conf" if variable == "NATS_ROUTE_PASSWORD" else "single.conf"
    result = natsconf.validate(NATS_DIR / config, ROUTES, unset=variable)
    assert result.returncode != 0
    assert variable in result.stdout + result.stderr


@pytest.mark.parametrize("name", ["single.conf", *natsconf.CLUSTER_CONFIGS])
def test_jetstream_fsyncs_every_write(name: str) -> None:
    block = re.search(r"jetstream\s*\{(.*?)\}", _without_comments(_text(name)), re.DOTALL)
    assert block, f"{name} has no jetstream block"
    assert re.search(r"^\s*sync_interval:\s*always\s*$", block[1], re.MULTILINE)
    assert re.search(r'^\s*store_dir:\s*"/data"\s*$', block[1], re.MULTILINE)
    assert "include ./accounts.conf" in _text(name)


@pytest.mark.parametrize("name", ["single.conf", *natsconf.CLUSTER_CONFIGS])
def test_a_batch_is_dropped_before_a_pipelining_lease_could_expire(name: str) -> None:
    """The loop's pipelined appends rely on it (docs/contract.md, "Pipelined appends")."""
    text = _without_comments(_text(name))
    found = re.search(r"limits\s*\{\s*batch\s*\{\s*timeout:\s*\"(\d+)s\"\s*\}", text)
    assert found, f"{name} leaves the batch timeout at the server's 10 s"
    assert int(found[1]) <= BATCH_TIMEOUT_S


def test_cluster_nodes_differ_only_in_their_name() -> None:
    texts = [_text(name) for name in natsconf.CLUSTER_CONFIGS]
    names = [re.search(r"^server_name:\s*(\S+)", t, re.MULTILINE)[1] for t in texts]  # type: ignore[index]
    assert names == ["n1", "n2", "n3"]
    normalised = {re.sub(r"\b(n|Node )[123]\b", "N", t) for t in texts}
    assert len(normalised) == 1
    cluster = _without_comments(texts[0])
    assert "routes" in cluster
    for variable in ROUTES:
        assert f"${variable}" in cluster
    assert "$NATS_ROUTE_PASSWORD" in cluster


def test_no_password_is_written_in_a_config() -> None:
    for name in CONFIGS:
        for match in re.finditer(r"password:\s*(\S+)", _without_comments(_text(name))):
            assert match[1].startswith("$"), f"{name}: literal password {match[1]!r}"


def test_every_service_has_its_own_user() -> None:
    users = re.findall(r"^\s*user:\s*(\w+)", _text("accounts.conf"), re.MULTILINE)
    assert sorted(users) == sorted(natsconf.USERS)
    assert {entry.name for entry in catalog.ALL} <= set(users)


def test_accounts_conf_is_the_access_model_rendered() -> None:
    """deploy/nats/accounts.conf is generated (`python -m tavern_cli.access`) from the same
    model the embedded server includes: the two cannot drift apart."""
    from tavern_cli import access

    shipped = (natsconf.NATS_DIR / "accounts.conf").read_text()
    assert shipped == access.render_accounts(), (
        "regenerate: python -m tavern_cli.access > deploy/nats/accounts.conf"
    )


def test_monitoring_listens_on_loopback_only() -> None:
    for name in ("single.conf", *natsconf.CLUSTER_CONFIGS):
        text = (natsconf.NATS_DIR / name).read_text()
        assert 'http: "127.0.0.1:8222"' in text, name
        assert "0.0.0.0:8222" not in text, name


def test_every_config_carries_the_request_limit_as_its_max_payload() -> None:
    """The bus's largest message is the services' RPC request limit plus headers, the same in
    every shipped config, in the Helm values and in the embedded server of `tavern up`."""
    from tavern_runtime.embedded import MAX_PAYLOAD
    from tavern_runtime.settings import TavernSettings

    limit = TavernSettings().rpc_max_request_bytes
    assert limit + 4096 <= MAX_PAYLOAD <= limit + 128 * 1024
    servers = [n for n in CONFIGS if n != "accounts.conf"]
    found = {n: re.findall(r"^max_payload:\s*(\d+)", _text(n), re.M) for n in servers}
    assert found == {n: [str(MAX_PAYLOAD)] for n in servers}
    values = (NATS_DIR.parent / "k8s" / "nats-values.yaml").read_text()
    assert re.findall(r"^\s+max_payload:\s*(\d+)", values, re.M) == [str(MAX_PAYLOAD)]


def test_the_embedded_server_drops_a_batch_as_soon(tmp_path: Path) -> None:
    config = EmbeddedNats(tmp_path, port=4999, http_port=4998).write_config()
    result = natsconf.validate(config, {})
    assert result.returncode == 0, result.stdout + result.stderr
    found = re.search(r'batch\s*\{\s*timeout:\s*"(\d+)s"', config.read_text())
    assert found
    assert int(found[1]) <= BATCH_TIMEOUT_S
