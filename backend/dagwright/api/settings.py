"""The server's view of the process's settings (settings.py, the one object that reads the
environment): what a server must not start with (`check`), whether its editor API needs the
admin token (`admin_required`), and the settings `dagwright serve` starts with, its options
over the process's (`server_settings`). No setting is copied here: a field added to
`Settings` is the server's too."""

from __future__ import annotations

import ipaddress

from dagwright.errors import DagwrightError
from dagwright.settings import Settings, load_settings


class ServerConfigError(DagwrightError):
    code = "server_config"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def server_settings(host: str | None = None, port: int | None = None) -> Settings:
    """The process's settings (environment, settings file) with these `dagwright serve`
    options over them, checked."""
    options = {name: value for name, value in (("host", host), ("port", port)) if value}
    settings = load_settings().model_copy(update=options)
    check(settings)
    return settings


def admin_required(settings: Settings) -> bool:
    """The editor API is open on loopback only; beyond it, it needs the admin token."""
    return settings.admin_token is not None or not _is_loopback(settings.host)


def check(settings: Settings) -> None:
    """Refuses (ServerConfigError) what a server must not start with."""
    if not _is_loopback(settings.host) and not settings.admin_token:
        raise ServerConfigError(
            f"listening on {settings.host} (beyond loopback) needs DAGWRIGHT_ADMIN_TOKEN: "
            "the editor API would otherwise be open to the network"
        )
    if settings.rate_limit <= 0:
        raise ServerConfigError("DAGWRIGHT_RATE_LIMIT must be a positive number")
    if not 0 < settings.run_timeout < float("inf"):
        raise ServerConfigError("DAGWRIGHT_RUN_TIMEOUT must be a positive number of seconds")
