"""The memory and variable stores' RPC edge (the agent's `memory_*` and `variable_*` tool calls):
request checks, what an operation needs from its process, and the stores' errors."""
