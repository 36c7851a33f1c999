"""The error of an asset that cannot be imported."""

from __future__ import annotations

from tavern_runtime.errors import ValidationFailed


class CardError(ValidationFailed):
    """A character card, lorebook or persona that cannot be imported; `field` names the culprit."""

    code = "invalid"
    reason = "invalid_card"

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}", field=field)
        self.field = field
