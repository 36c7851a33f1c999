"""Every pydantic-settings class of the workspace and the environment variable of each field,
found in the source (so a settings class added later is covered without editing the tests)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from pydantic_settings import BaseSettings

REPO = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = (
    *sorted((REPO / "libs").glob("*")),
    *sorted((REPO / "services").glob("*")),
    REPO / "cli",
)
_CLASS = re.compile(r"^class \w+\([^)]*Settings[^)]*\):|BaseSettings", re.MULTILINE)


def _modules() -> list[str]:
    modules = []
    for root in PACKAGE_ROOTS:
        for path in sorted(root.glob("tavern_*/**/*.py")):
            if "/build/" in str(path) or not _CLASS.search(path.read_text(errors="replace")):
                continue
            parts = path.relative_to(root).with_suffix("").parts
            modules.append(".".join(p for p in parts if p != "__init__"))
    return modules


def settings_classes() -> list[type[BaseSettings]]:
    found: dict[str, type[BaseSettings]] = {}
    for name in _modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseSettings)
                and value.__module__ == name
            ):
                found[f"{name}.{value.__qualname__}"] = value
    return list(found.values())


def env_names(cls: type[BaseSettings]) -> set[str]:
    """The variables `cls` reads (prefix + field name, or the field's alias)."""
    prefix = str(cls.model_config.get("env_prefix", ""))
    names = set()
    for field_name, info in cls.model_fields.items():
        alias = info.validation_alias or info.alias
        names.add(str(alias).upper() if isinstance(alias, str) else f"{prefix}{field_name}".upper())
    return names


def all_env_names() -> set[str]:
    return {name for cls in settings_classes() for name in env_names(cls)}
