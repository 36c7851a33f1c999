"""AgentTavern's public event contract: models, subjects and streams.

The codec lives in `tavern_events.union`; event models in one module per family.
"""

from tavern_events.errors import ContractError, UnknownEventError
from tavern_events.ids import new_id
from tavern_events.skips import SkipCounter, Skipped
from tavern_events.union import (
    CURRENT_VERSIONS,
    EVENT_MODELS,
    AnyEvent,
    Decoded,
    decode,
    decode_or_skip,
    encode,
    msg_id_for,
    subject_for,
)

__all__ = [
    "CURRENT_VERSIONS",
    "EVENT_MODELS",
    "AnyEvent",
    "ContractError",
    "Decoded",
    "SkipCounter",
    "Skipped",
    "UnknownEventError",
    "decode",
    "decode_or_skip",
    "encode",
    "msg_id_for",
    "new_id",
    "subject_for",
]
