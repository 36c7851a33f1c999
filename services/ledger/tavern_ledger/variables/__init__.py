"""The variable store the agent's `variable_*` tools call: operations with compare-and-set
revisions, and rows of `ledger.variable_scope` and `ledger.variable`."""
