"""The models stay encodable with `exclude_none` and publishable as JSON Schema (AsyncAPI)."""

from __future__ import annotations

from typing import Any, get_args

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from tavern_events.dlq import DeadLetter
from tavern_events.union import (
    ASSET_EVENT_ADAPTER,
    EVENT_MODELS,
    INPUT_ADAPTER,
    LEDGER_FACT_ADAPTER,
    SESSION_EVENT_ADAPTER,
)


def _models_in(annotation: Any) -> set[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {annotation}
    return {m for arg in get_args(annotation) for m in _models_in(arg)}


def _all_models() -> list[type[BaseModel]]:
    seen: set[type[BaseModel]] = set()
    todo: list[type[BaseModel]] = [*EVENT_MODELS.values(), DeadLetter]
    while todo:
        model = todo.pop()
        if model not in seen:
            seen.add(model)
            for field in model.model_fields.values():
                todo.extend(_models_in(field.annotation))
    return sorted(seen, key=lambda m: m.__name__)


def _accepts_none(annotation: Any) -> bool:
    try:
        TypeAdapter(annotation).validate_python(None)
    except ValidationError:
        return False
    return True


@pytest.mark.parametrize("model", _all_models(), ids=lambda m: m.__name__)
def test_nullable_fields_default_to_none(model: type[BaseModel]) -> None:
    """`encode` drops None values, so a field that accepts None must read back as None."""
    for name, field in model.model_fields.items():
        if _accepts_none(field.annotation):
            assert not field.is_required(), f"{model.__name__}.{name}"
            assert field.default is None, f"{model.__name__}.{name}"


@pytest.mark.parametrize(
    "adapter", [SESSION_EVENT_ADAPTER, INPUT_ADAPTER, LEDGER_FACT_ADAPTER, ASSET_EVENT_ADAPTER]
)
def test_every_union_has_a_discriminated_json_schema(adapter: TypeAdapter[Any]) -> None:
    schema = adapter.json_schema()
    assert schema["discriminator"]["propertyName"] == "type"
    assert len(schema["oneOf"]) == len(schema["discriminator"]["mapping"])


def test_every_event_names_its_type_in_its_schema() -> None:
    for event_type, model in EVENT_MODELS.items():
        assert model.model_json_schema()["properties"]["type"]["const"] == event_type
