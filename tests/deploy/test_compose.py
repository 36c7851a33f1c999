"""compose.yaml against the Compose Specification schema (check-jsonschema's copy, and the one
in shared/schemas when it sits beside the clone), and what the schema cannot see: health checks,
start order, restarts, one NATS user per service, and a deploy/.env.example that names every
setting with its default."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tavern_cli import catalog
from tests.deploy.dockerfile import env_values, parse
from tests.deploy.settings_catalog import all_env_names, env_names, settings_classes

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "compose.yaml"
ENV_EXAMPLE = REPO / "deploy" / ".env.example"
SHARED = REPO.parent / "shared"
COMPOSE_SCHEMA = SHARED / "schemas" / "compose-spec.json"
LONG_RUNNING = tuple(entry.name for entry in catalog.ALL)
INTERPOLATION = re.compile(r"^\$\{([A-Z0-9_]+):\?([^}]*)\}$")
"""A required variable: `${VAR:?message}` (compose stops with the message when VAR is unset)."""
ANY_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(:?[-?+])?([^}]*)\}")
DIGEST = re.compile(r"^[a-z0-9./_-]+(:[\w.-]+)?@sha256:[0-9a-f]{64}$")


def _schema_paths() -> list[Path]:
    """The Compose Specification schemas to validate against: the copy check-jsonschema ships
    (a dev requirement, so a fresh clone has it) and, when the design notes sit beside the
    clone, the one in shared/schemas/."""
    vendored = Path(str(files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"))
    if not vendored.is_file():
        pytest.fail(f"{vendored} is missing: install requirements.lock (check-jsonschema)")
    return [vendored, *([COMPOSE_SCHEMA] if COMPOSE_SCHEMA.is_file() else [])]


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def _services() -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = _compose()["services"]
    return services


def _seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)", duration)
    assert match, duration
    return float(match[1]) * {"ms": 0.001, "s": 1, "m": 60}[match[2]]


UNSET_KEY = re.compile(r"^#\s*(TAVERN_[A-Z0-9_]+)=$")


def _unset_keys() -> set[str]:
    """Keys listed commented out (`# KEY=`): their default is "unset"."""
    lines = ENV_EXAMPLE.read_text().splitlines()
    return {m[1] for m in map(UNSET_KEY.match, lines) if m}


def _env_file() -> dict[str, str]:
    """The active KEY=value lines."""
    values = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, sep, value = line.partition("=")
            assert sep, f"not KEY=value: {line!r}"
            assert (key, value) == (key.strip(), value.strip()), f"spaces in {line!r}"
            assert not value.startswith(('"', "'")), f"quoted value in {line!r} (compose keeps it)"
            values[key] = value
    return values


# --- schema ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("schema_path", _schema_paths(), ids=lambda p: p.parent.name)
def test_compose_file_matches_the_compose_specification(schema_path: Path) -> None:
    schema = json.loads(schema_path.read_text())
    validator = jsonschema.Draft7Validator(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(_compose())]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("schema_path", _schema_paths(), ids=lambda p: p.parent.name)
def test_compose_file_passes_check_jsonschema(schema_path: Path) -> None:
    cli = Path(sys.executable).parent / "check-jsonschema"
    if not cli.exists():
        pytest.fail("check-jsonschema is missing: install requirements.lock")
    result = subprocess.run(
        [str(cli), "--schemafile", str(schema_path), str(COMPOSE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


# --- what the schema cannot see -------------------------------------------------------------------


def test_every_service_has_a_health_check_except_the_one_shot_init() -> None:
    for name, service in _services().items():
        check = service.get("healthcheck", {})
        if name == "init":
            assert check == {"disable": True}
        else:
            assert check.get("test"), f"{name} has no health check"
    for name in LONG_RUNNING:
        assert _services()[name]["healthcheck"]["test"][-1].endswith("healthcheck.py")


def test_services_start_after_their_servers_and_a_successful_init() -> None:
    services = _services()
    assert services["init"]["command"] == ["init"]
    assert services["init"]["depends_on"] == {
        "nats": {"condition": "service_healthy"},
        "postgres": {"condition": "service_healthy"},
    }
    for entry in catalog.ALL:
        service = services[entry.name]
        assert service["command"] == ["serve", entry.name]
        depends = service["depends_on"]
        assert depends["nats"] == {"condition": "service_healthy"}
        assert depends["init"] == {"condition": "service_completed_successfully"}
        if entry.migrations() is not None:
            assert depends["postgres"] == {"condition": "service_healthy"}, entry.name


def test_restart_policies_and_grace_periods() -> None:
    services = _services()
    assert services["init"]["restart"] == "no"
    for name in ("nats", "postgres", *LONG_RUNNING):
        assert services[name]["restart"] in ("unless-stopped", "always"), name
        assert "stop_grace_period" in services[name], name
    for name in LONG_RUNNING:
        grace = float(services[name]["environment"]["TAVERN_SHUTDOWN_GRACE_S"])
        assert _seconds(services[name]["stop_grace_period"]) > grace, name


def test_each_service_logs_in_to_nats_as_its_own_user() -> None:
    services = _services()
    nats_env = services["nats"]["environment"]
    expected = {"init": "operator", **{name: name for name in LONG_RUNNING}}
    for name, user in expected.items():
        env = services[name]["environment"]
        assert env["TAVERN_NATS_USER"] == user
        password = env["TAVERN_NATS_PASSWORD"]
        variable = f"NATS_{user.upper()}_PASSWORD"
        assert INTERPOLATION.match(password), password
        assert INTERPOLATION.match(password)[1] == variable  # type: ignore[index]
        assert nats_env[variable] == password, "nats-server and the service disagree"


def test_nats_runs_the_single_node_config_with_a_data_volume() -> None:
    nats = _services()["nats"]
    assert nats["command"] == ["--config", "/etc/nats/tavern/single.conf"]
    assert "./deploy/nats:/etc/nats/tavern:ro" in nats["volumes"]
    assert "nats-data:/data" in nats["volumes"]
    assert "js-enabled-only=true" in " ".join(nats["healthcheck"]["test"])
    assert not any(p.endswith(":8222") for p in nats["ports"]), "monitoring has no auth"
    assert "pg-data:/var/lib/postgresql" in _services()["postgres"]["volumes"]


def test_containers_serve_health_where_the_image_probes_it() -> None:
    image_env = env_values(parse(REPO / "deploy" / "Dockerfile")[-1])
    for name in LONG_RUNNING:
        env = _services()[name]["environment"]
        assert env["TAVERN_HEALTH_PORT"] == image_env["TAVERN_HEALTH_PORT"], name
        assert env["TAVERN_HEALTH_HOST"] == "0.0.0.0"


def test_compose_sets_only_known_settings() -> None:
    known = all_env_names()
    for name, service in _services().items():
        unknown = {k for k in service.get("environment", {}) if k.startswith("TAVERN_")} - known
        assert not unknown, f"{name} sets {unknown}: no settings field reads them"
        for env_file in service.get("env_file", []):
            assert (REPO / env_file).is_file(), env_file


# --- deploy/.env.example --------------------------------------------------------------------------


def test_env_example_names_every_settings_field() -> None:
    keys = set(_env_file()) | _unset_keys()
    missing = all_env_names() - keys
    assert not missing, f"deploy/.env.example lacks {sorted(missing)}"
    assert keys <= all_env_names(), f"unknown keys {sorted(keys - all_env_names())}"


@pytest.mark.parametrize("settings", settings_classes(), ids=lambda c: c.__name__)
def test_env_example_holds_the_defaults(
    settings: type[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in env_names(settings) | set(_env_file()):
        monkeypatch.delenv(key, raising=False)
    defaults = settings(_env_file=None).model_dump()
    assert settings(_env_file=ENV_EXAMPLE).model_dump() == defaults
    for key in _unset_keys() & env_names(settings):
        field = key.removeprefix(str(settings.model_config["env_prefix"])).lower()
        assert defaults[field] is None, f"{key} is listed as unset but defaults to a value"


# --- secrets, database roles, images ----------------------------------------------------------


def _variables() -> list[tuple[str, str, str]]:
    """Every `${VAR...}` in compose.yaml: (name, operator, rest)."""
    return [(m[1], m[2] or "", m[3]) for m in ANY_VARIABLE.finditer(COMPOSE.read_text())]


def test_every_secret_is_required_with_a_message_naming_it() -> None:
    secrets = [v for v in _variables() if "PASSWORD" in v[0] or "SECRET" in v[0]]
    assert secrets
    for name, operator, rest in secrets:
        if operator == "":
            continue  # a plain ${VAR}: its required form appears once in x-secrets
        assert operator == ":?", f"{name} falls back to a value instead of stopping the start"
        assert ".env" in rest  # compose names the variable, the message says where it goes
    required = {name for name, operator, _ in secrets if operator == ":?"}
    plain = {name for name, operator, _ in secrets if operator == ""}
    assert plain <= required, f"{plain - required} used without a required form"
    assert "-dev-only" not in COMPOSE.read_text()


def test_each_service_with_tables_logs_in_to_postgres_as_its_own_role() -> None:
    services = _services()
    for entry in catalog.SERVICES:
        env = services[entry.name]["environment"]
        if entry.migrations() is None:
            assert "TAVERN_DATABASE_URL" not in env, f"{entry.name} keeps no tables"
            assert "postgres" not in services[entry.name]["depends_on"]
            continue
        dsn = env["TAVERN_DATABASE_URL"]
        role = entry.name
        assert dsn.startswith(f"postgresql://{role}:${{TAVERN_DB_{role.upper()}_PASSWORD}}@"), dsn
    init = services["init"]["environment"]
    assert init["TAVERN_DATABASE_URL"].startswith("postgresql://tavern:${POSTGRES_PASSWORD}@")
    for role in ("ledger", "projector", "consolidator"):
        assert INTERPOLATION.match(init[f"TAVERN_DB_{role.upper()}_PASSWORD"])
    for name, service in services.items():
        if name not in ("init", "postgres"):
            assert "POSTGRES_PASSWORD" not in json.dumps(service), name


def test_every_pulled_image_is_pinned_by_digest() -> None:
    for name, service in _services().items():
        if "build" in service:
            continue  # built here from deploy/Dockerfile
        assert DIGEST.match(service["image"]), f"{name}: {service['image']} is not pinned"
