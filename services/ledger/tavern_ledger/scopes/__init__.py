"""Who is bound to which scope and who owns it: session bindings read from the session log,
scope owners, the scopes a tool call may address, and the scope a session's evidence lives in."""
