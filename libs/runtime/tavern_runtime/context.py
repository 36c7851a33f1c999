"""FastStream's `Context` parameter, resolved on the event loop.

FastDepends runs a custom field's `use` in a worker thread when `use` is a plain function,
and FastStream's context field's `use` is one: every message of a handler that takes a
`Context(...)` argument paid a thread hop (and the GIL handed back and forth) before the
handler ran. Resolving a context name is a dictionary lookup, so it runs here on the loop;
`Message` is FastStream's `NatsMessage` annotation resolved the same way.
"""

from __future__ import annotations

from typing import Annotated, Any

from faststream._internal.context.context_type import Context as _ContextField
from faststream.nats.message import NatsMessage


class _LoopContextField(_ContextField):
    async def use(self, /, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        resolved: dict[str, Any] = super().use(**kwargs)
        return resolved


def Context(real_name: str = "") -> Any:
    """Use as `ledger: Ledger = Context(LEDGER_KEY)`, like `faststream.Context`."""
    return _LoopContextField(real_name=real_name)


Message = Annotated[NatsMessage, Context("message")]
"""The message being handled, for `msg: Message` (`faststream.nats.NatsMessage` resolves it
through FastStream's own context field, in a worker thread)."""
