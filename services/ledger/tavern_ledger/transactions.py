"""Transactions on the ledger's pool, with driver errors translated at the edge (the shared
helpers of `tavern_runtime.pgerrors`)."""

from __future__ import annotations

from tavern_runtime.pgerrors import PoolSource as PoolSource
from tavern_runtime.pgerrors import connection as connection
from tavern_runtime.pgerrors import transaction as transaction
