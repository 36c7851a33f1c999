"""asyncpg queries on the `consolidator` schema; they return domain records.

Only this package touches the driver; callers hand in a connection (inside their transaction).
"""

from __future__ import annotations

import json
from typing import Any

from tavern_runtime.pgerrors import PoolSource as PoolSource
from tavern_runtime.pgerrors import connection as connection
from tavern_runtime.pgerrors import transaction as transaction

Conn = Any
"""An asyncpg connection (asyncpg ships no type information)."""


def to_json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=str)


def from_json(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) else value
