"""The AsyncAPI documents of AgentTavern, generated from the code (`tavern docs`).

`contract.json` documents every stream and request subject of the public contract with the
event models of `tavern_events`; one document per service comes from the service's own app.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from faststream import FastStream
from faststream.nats import JStream, NatsBroker
from faststream.specification import AsyncAPI

from tavern_events import streams, subjects
from tavern_events.dlq import DeadLetter
from tavern_events.union import AssetEventUnion, InputUnion, LedgerFactUnion, SessionEventUnion

SERVICES = ("loop", "ledger", "projector", "consolidator")
DOCS_DIR = Path("docs") / "asyncapi"
UNREACHABLE = "nats://127.0.0.1:1"  # documents are built without connecting


def _contract_app() -> FastStream:
    broker = NatsBroker(UNREACHABLE)
    channels: list[tuple[str, str, Any, str]] = [
        (
            "tavern.session.{session_id}.{family}.{name}",
            streams.SESSIONS.name,
            SessionEventUnion,
            "The session logs: gapless, conditional appends; the single source of truth.",
        ),
        (
            "tavern.input.{session_id}.{kind}",
            streams.INPUTS.name,
            InputUnion,
            "Messages, cancels and commands for a session's loop (Nats-Msg-Id = input_id).",
        ),
        (
            "tavern.ledger.{scope_id}.{family}.{name}",
            streams.LEDGER.name,
            LedgerFactUnion,
            "Facts the ledger committed; projections follow them.",
        ),
        (
            "tavern.asset.{kind}.{asset_id}.{name}",
            streams.ASSETS.name,
            AssetEventUnion,
            "Character cards, lorebooks, personas and presets imported or edited.",
        ),
        (
            "tavern.dlq.{service}",
            streams.DLQ.name,
            DeadLetter,
            "Poison messages with the reason and the consumer that gave up.",
        ),
    ]
    for subject, stream, schema, description in channels:
        broker.publisher(
            subject,
            stream=JStream(stream, declare=False),
            schema=schema,
            title=subject.split(".")[1],
            description=description,
        )
    spec = AsyncAPI(
        title="AgentTavern contract",
        version=_version(),
        description=f"Streams {', '.join(s.name for s in streams.ALL)}; request/reply "
        f"under {subjects.RPC_LEDGER_ALL} and {subjects.RPC_PROJECTOR_ALL}.",
    )
    return FastStream(broker, specification=spec)


def _version() -> str:
    from importlib.metadata import version

    return version("tavern-events")


def _service_app(name: str) -> FastStream:
    app_module = importlib.import_module(f"tavern_{name}.app")
    config = importlib.import_module(f"tavern_{name}.config")
    settings_cls = next(
        getattr(config, n) for n in dir(config) if n.endswith("Settings") and n != "TavernSettings"
    )
    app: FastStream = app_module.build_app(settings_cls(nats_url=UNREACHABLE))
    return app


def documents() -> dict[str, str]:
    """File name -> JSON text of every document, deterministic (sorted keys)."""
    apps = {"contract": _contract_app(), **{name: _service_app(name) for name in SERVICES}}
    return {f"{name}.json": _render(app) for name, app in apps.items()}


def _render(app: FastStream) -> str:
    assert app.schema is not None
    schema = app.schema.to_specification().to_jsonable()
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write(root: Path) -> list[Path]:
    target = root / DOCS_DIR
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in documents().items():
        path = target / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def stale(root: Path) -> list[str]:
    """Documents whose committed text differs from what the code generates now."""
    target = root / DOCS_DIR
    return [
        name
        for name, text in documents().items()
        if not (target / name).exists() or (target / name).read_text(encoding="utf-8") != text
    ]
