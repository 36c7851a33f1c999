"""deploy/k8s: the manifests against the Kubernetes schemas (kubernetes-validate, strict), YAML
style (yamllint), and what a schema cannot see: probes on the health port, one NATS user per
service, PDBs, the init Job, the Secret keys, and Helm values for an R3 JetStream cluster."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tavern_cli import catalog
from tests.deploy import natsconf
from tests.deploy.dockerfile import parse
from tests.deploy.settings_catalog import all_env_names

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
NOT_MANIFESTS = {"kustomization.yaml", "nats-values.yaml"}
MANIFESTS = sorted(p for p in K8S.glob("*.yaml") if p.name not in NOT_MANIFESTS)
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")


def _tool(name: str) -> str:
    path = Path(sys.executable).parent / name
    if not path.exists():
        pytest.fail(f"{name} is missing: install requirements.lock (it pins the deploy validators)")
    return str(path)


def _docs(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def _objects() -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for p in MANIFESTS for d in _docs(p)}


def _config() -> dict[str, str]:
    data: dict[str, str] = _objects()[("ConfigMap", "tavern-config")]["data"]
    return data


def _container(kind: str, name: str) -> dict[str, Any]:
    [container] = _objects()[(kind, name)]["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _env(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


# --- validators -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
def test_manifests_pass_kubernetes_validate_strict(version: str) -> None:
    result = subprocess.run(
        [_tool("kubernetes-validate"), "-k", version, "--strict", *map(str, MANIFESTS)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "passed" in result.stdout + result.stderr


def test_deploy_yaml_passes_yamllint() -> None:
    files = [REPO / "compose.yaml", *sorted((REPO / "deploy").rglob("*.yaml"))]
    result = subprocess.run(
        [_tool("yamllint"), "-c", str(REPO / "deploy" / "yamllint.yaml"), "-s", *map(str, files)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_kustomization_lists_every_manifest() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    resources = set(kustomization["resources"])
    assert resources == {p.name for p in MANIFESTS} - {"secret.example.yaml"}
    [image] = kustomization["images"]
    assert all(
        container["image"] == image["name"]
        for obj in _objects().values()
        if obj["kind"] in ("Deployment", "Job")
        for container in obj["spec"]["template"]["spec"]["containers"]
    )


# --- what the schemas cannot see ------------------------------------------------------------------


@pytest.mark.parametrize("service", [entry.name for entry in catalog.ALL])
def test_service_deployment_probes_health_and_logs_in_as_itself(service: str) -> None:
    deployment = _objects()[("Deployment", f"tavern-{service}")]
    pod = deployment["spec"]["template"]["spec"]
    container = _container("Deployment", f"tavern-{service}")
    assert container["args"] == ["serve", service]
    [port] = [p for p in container["ports"] if p["name"] == "health"]
    assert port["containerPort"] == int(_config()["TAVERN_HEALTH_PORT"])
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port["name"]}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port["name"]}
    assert container["resources"]["requests"].keys() >= {"cpu", "memory"}
    assert "memory" in container["resources"]["limits"]
    grace = float(_config()["TAVERN_SHUTDOWN_GRACE_S"])
    assert pod["terminationGracePeriodSeconds"] > grace
    env = _env(container)
    assert env["TAVERN_NATS_USER"] == service
    assert env["TAVERN_NATS_PASSWORD"]["secretKeyRef"]["key"] == f"nats-{service}-password"
    if catalog.BY_NAME[service].migrations() is not None:  # its own role, not the admin's
        assert env["TAVERN_DATABASE_URL"]["secretKeyRef"]["key"] == f"{service}-database-url"
    else:
        assert "TAVERN_DATABASE_URL" not in env, f"{service} keeps no tables: no database login"
    assert container["envFrom"] == [{"configMapRef": {"name": "tavern-config"}}]


@pytest.mark.parametrize("service", [entry.name for entry in catalog.ALL])
def test_service_has_a_disruption_budget_over_its_pods(service: str) -> None:
    deployment = _objects()[("Deployment", f"tavern-{service}")]
    budget = _objects()[("PodDisruptionBudget", f"tavern-{service}")]
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    if deployment["spec"]["replicas"] == 1:  # a budget of 1 on one pod would block every drain
        assert budget["spec"].get("maxUnavailable") == 1
    else:
        assert budget["spec"]["minAvailable"] >= 1


def test_pods_run_as_the_image_user_without_root() -> None:
    [user] = parse(REPO / "deploy" / "Dockerfile")[-1].all("USER")
    uid = int(user.args.split(":")[0])
    for obj in _objects().values():
        if obj["kind"] not in ("Deployment", "Job"):
            continue
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] == uid
        for container in pod["containers"]:
            assert container["securityContext"]["allowPrivilegeEscalation"] is False


def test_init_job_provisions_as_the_operator() -> None:
    job = _objects()[("Job", "tavern-init")]
    container = _container("Job", "tavern-init")
    assert container["args"] == ["init"]
    env = _env(container)
    assert env["TAVERN_NATS_USER"] == "operator"
    assert env["TAVERN_DATABASE_URL"]["secretKeyRef"]["key"] == "database-url"
    for role in ("ledger", "projector", "consolidator"):  # the roles init creates
        key = env[f"TAVERN_DB_{role.upper()}_PASSWORD"]["secretKeyRef"]["key"]
        assert key == f"db-{role}-password"
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")


def test_config_map_holds_known_settings_for_an_r3_cluster() -> None:
    config = _config()
    assert set(config) <= all_env_names()
    assert config["TAVERN_STREAM_REPLICAS"] == "3"
    assert config["TAVERN_HEALTH_HOST"] == "0.0.0.0"
    assert "DATABASE" not in " ".join(config), "the DSN holds a password: it belongs in a Secret"


def test_every_referenced_secret_key_is_in_the_example_secret() -> None:
    example = _objects()[("Secret", "tavern-secrets")]["stringData"]
    for obj in _objects().values():
        if obj["kind"] not in ("Deployment", "Job"):
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            for value in _env(container).values():
                if isinstance(value, dict) and "secretKeyRef" in value:
                    assert value["secretKeyRef"]["name"] == "tavern-secrets"
                    assert value["secretKeyRef"]["key"] in example


def test_nats_helm_values_run_an_r3_jetstream_cluster_with_our_users() -> None:
    values = yaml.safe_load((K8S / "nats-values.yaml").read_text())
    config = values["config"]
    assert config["cluster"]["enabled"] is True
    assert config["cluster"]["replicas"] == 3
    assert config["jetstream"]["enabled"] is True
    assert config["jetstream"]["merge"]["sync_interval"] == "always"
    assert config["jetstream"]["merge"]["limits"]["batch"]["timeout"] == "3s"  # pipelined appends
    assert config["jetstream"]["fileStore"]["pvc"]["enabled"] is True
    assert config["merge"]["00$include"] == "accounts.conf"
    env = values["container"]["env"]
    for user in natsconf.USERS:
        assert env[f"NATS_{user.upper()}_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == user
    assert values["podDisruptionBudget"]["enabled"] is True


def _policies() -> dict[str, dict[str, Any]]:
    return {name: obj for (kind, name), obj in _objects().items() if kind == "NetworkPolicy"}


def _selects(policy: dict[str, Any], labels: dict[str, str]) -> bool:
    selector = policy["spec"]["podSelector"]
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for rule in selector.get("matchExpressions", []):
        assert rule["operator"] == "In"
        if labels.get(rule["key"]) not in rule["values"]:
            return False
    return True


def test_network_policies_deny_by_default_and_admit_only_the_health_port() -> None:
    policies = _policies()
    deny = policies["tavern-default-deny"]["spec"]
    assert deny["podSelector"] == {}
    assert deny["policyTypes"] == ["Ingress"]
    assert "ingress" not in deny
    for obj in _objects().values():
        if obj["kind"] not in ("Deployment", "Job"):
            continue
        labels = obj["spec"]["template"]["metadata"]["labels"]
        selecting = [p for p in policies.values() if _selects(p, labels)]
        ingress = [rule for p in selecting for rule in p["spec"].get("ingress", [])]
        ports = {port["port"] for rule in ingress for port in rule["ports"]}
        web = {8470} if labels.get("app.kubernetes.io/component") == "gateway" else set()
        assert ports == {int(_config()["TAVERN_HEALTH_PORT"]), *web}, obj["metadata"]["name"]
    nats_rules = policies["tavern-nats"]["spec"]["ingress"]
    nats_ports = {port["port"] for rule in nats_rules for port in rule["ports"]}
    assert nats_ports == {4222, 6222}, "monitoring (8222, no auth) admits no pod"


def test_network_policies_are_in_the_kustomization() -> None:
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    assert "networkpolicy.yaml" in kustomization["resources"]


def test_nats_image_is_pinned_by_digest() -> None:
    image = yaml.safe_load((K8S / "nats-values.yaml").read_text())["container"]["image"]
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", image["digest"])
