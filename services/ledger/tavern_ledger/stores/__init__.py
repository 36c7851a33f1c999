"""The memory and variable stores: session bindings, scope resolution, RPC operations, facts."""
