"""Errors of the contract: malformed data versus events this code does not know (yet).

Callers dead-letter a `ContractError`; they skip and count an `UnknownEventError`.
"""

from __future__ import annotations

from tavern_events.skips import Skipped


class ContractError(ValueError):
    """Data that breaks the contract: not JSON, wrong shape, a field that fails validation."""


class UnknownEventError(ValueError):
    """A well-formed event of a type, or a version, this code does not know.

    Raised by `union.decode`; `union.decode_or_skip` returns its `skipped` instead.
    """

    def __init__(self, skipped: Skipped) -> None:
        super().__init__(f"{skipped.reason}: {skipped.type!r} v{skipped.v}")
        self.skipped = skipped
