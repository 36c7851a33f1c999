"""Golden event payloads under tests/fixtures/events: `<family>__<name>[.v<N>].json`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "events"


def golden_path(event_type: str, version: int | None = None) -> Path:
    family, name = event_type.split("/")
    suffix = f".v{version}" if version is not None else ""
    return FIXTURES / f"{family}__{name}{suffix}.json"


def golden_bytes(event_type: str, version: int | None = None) -> bytes:
    return golden_path(event_type, version).read_bytes()


def golden(event_type: str, version: int | None = None) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(golden_bytes(event_type, version))
    return data


def golden_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.json"))


def type_of_file(path: Path) -> tuple[str, int | None]:
    """`session__created.v1.json` -> (`session/created`, 1)."""
    stem, _, version = path.name.removesuffix(".json").partition(".")
    family, _, name = stem.partition("__")
    return f"{family}/{name}", int(version.removeprefix("v")) if version else None
