"""The dead-letter record a consumer publishes to `tavern.dlq.<service>` when it gives up."""

from __future__ import annotations

import base64

from pydantic import Field, ValidationError

from tavern_events import subjects
from tavern_events.envelope import Id, Model, UtcDatetime
from tavern_events.errors import ContractError

DATA_CAP_BYTES = 64 * 1024


def data_fields(data: bytes, cap: int = DATA_CAP_BYTES) -> dict[str, str | bool | int]:
    """`data_b64` (the first `cap` bytes), `data_truncated` and `data_size` for `data`.

    Use as `DeadLetter(..., **data_fields(msg.data))`.
    """
    encoded = base64.b64encode(data[:cap]).decode("ascii")
    return {"data_b64": encoded, "data_truncated": len(data) > cap, "data_size": len(data)}


class DeadLetter(Model):
    """A poison message with the reason and the consumer that gave up on it."""

    v: int = 1
    id: Id
    service: str = Field(pattern=r"^[a-z][a-z0-9-]{0,63}$")
    consumer: str = Field(min_length=1, max_length=256)
    stream: str = Field(min_length=1, max_length=256)
    stream_seq: int = Field(ge=0)
    subject: str = Field(min_length=1, max_length=1024)
    deliveries: int = Field(ge=0)
    reason: str = Field(max_length=2000)
    error_type: str = Field(max_length=200)
    ts: UtcDatetime
    headers: dict[str, str] = Field(default_factory=dict)
    data_b64: str
    """The original message bytes, base64, cut at `DATA_CAP_BYTES`."""
    data_truncated: bool = False
    data_size: int = Field(default=0, ge=0)

    @property
    def dlq_subject(self) -> str:
        return subjects.dead_letter(self.service)

    def data(self) -> bytes:
        """The (possibly truncated) original bytes."""
        return base64.b64decode(self.data_b64)


def encode_dead_letter(record: DeadLetter) -> bytes:
    return record.model_dump_json(exclude_none=True).encode()


def decode_dead_letter(data: bytes) -> DeadLetter:
    """Parse a dead-letter record; raises `ContractError` if it is not one."""
    try:
        return DeadLetter.model_validate_json(data)
    except ValidationError as exc:
        raise ContractError(f"malformed dead-letter record: {exc}") from exc
