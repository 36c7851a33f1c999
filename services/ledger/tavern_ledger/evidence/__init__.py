"""asyncpg queries of the evidence ledger: evidence rows and their postings, ingestion's writes,
observations, the lexicon's version and export pages; they return domain records.

Callers hand in a connection (inside their transaction).
"""

from typing import Any

Conn = Any
"""An asyncpg connection (asyncpg ships no type information)."""
