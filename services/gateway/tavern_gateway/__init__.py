"""The gateway: the only thing a browser talks to. Pages, an HTTP API (OpenAPI at /docs) and
server-sent events of a session's log, acting on the bus as the signed-in user."""
