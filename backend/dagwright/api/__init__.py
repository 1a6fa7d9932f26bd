"""The HTTP API (FastAPI): routes, auth, error mapping, server-sent events."""
