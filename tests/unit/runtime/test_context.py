"""The handlers' `Context(...)` parameter resolves on the event loop, not in a worker thread."""

from __future__ import annotations

from typing import get_args

from fast_depends.utils import is_coroutine_callable
from faststream import ContextRepo

from tavern_runtime.context import Context, Message


async def test_a_context_argument_is_resolved_on_the_loop() -> None:
    service = object()
    repo = ContextRepo()
    repo.set_global("ledger", service)
    field = Context("ledger").set_param_name("ledger")
    assert is_coroutine_callable(field.use)  # FastDepends awaits it instead of a thread hop
    resolved = await field.use(context__=repo)
    assert resolved["ledger"] is service


async def test_a_missing_name_is_left_out_for_the_handler_to_refuse() -> None:
    field = Context("absent").set_param_name("absent")
    resolved = await field.use(context__=ContextRepo(), absent="stale")
    assert "absent" not in resolved


def test_the_message_annotation_resolves_on_the_loop_too() -> None:
    field = next(m for m in get_args(Message)[1:] if hasattr(m, "use"))
    assert is_coroutine_callable(field.use)
