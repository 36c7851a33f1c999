"""The memory store the agent's `memory_*` tools call: operations, rows of `ledger.memory`, and
its use of the ledger's write gate."""
