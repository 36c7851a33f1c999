"""asyncpg queries on the `ledger` schema's evidence ledger; they return domain records.

Only this package touches the driver; callers hand in a connection (inside their transaction).
"""

from typing import Any

Conn = Any
"""An asyncpg connection (asyncpg ships no type information)."""
