"""Server settings, from the environment (and the `dagwright serve` options)."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from dagwright.errors import DagwrightError


class ServerConfigError(DagwrightError):
    code = "server_config"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(slots=True)
class ServerSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = field(default_factory=lambda: Path("data"))
    database_url: str | None = None  # None: SQLite under data_dir
    admin_token: str | None = None
    cors_origins: list[str] = field(default_factory=list)
    rate_limit: float = 100.0  # requests per second per API key (burst: 2 seconds' worth)
    replica: str = field(default_factory=socket.gethostname)
    max_body_bytes: int = 2 * 1024 * 1024
    invoke_depth: int = 8
    # The deadline of a published run, in seconds, unless its app sets its own
    # (settings.run_timeout_s): a run still going then fails with `run_timeout`.
    run_timeout: float = 300.0

    @classmethod
    def from_env(cls, host: str | None = None, port: int | None = None) -> ServerSettings:
        env = os.environ
        origins = [o.strip() for o in env.get("DAGWRIGHT_CORS_ORIGINS", "").split(",") if o]
        settings = cls(
            host=host or env.get("DAGWRIGHT_HOST", "127.0.0.1"),
            port=port or int(env.get("DAGWRIGHT_PORT", "8000")),
            data_dir=Path(env.get("DAGWRIGHT_DATA_DIR", "data")),
            database_url=env.get("DAGWRIGHT_DATABASE_URL") or None,
            admin_token=env.get("DAGWRIGHT_ADMIN_TOKEN") or None,
            cors_origins=origins,
            rate_limit=float(env.get("DAGWRIGHT_RATE_LIMIT", "100")),
            replica=env.get("DAGWRIGHT_REPLICA") or socket.gethostname(),
            max_body_bytes=int(env.get("DAGWRIGHT_MAX_BODY_BYTES", str(2 * 1024 * 1024))),
            run_timeout=float(env.get("DAGWRIGHT_RUN_TIMEOUT", "300")),
        )
        settings.check()
        return settings

    @property
    def admin_required(self) -> bool:
        """The editor API is open on loopback only; beyond it, it needs the admin token."""
        return self.admin_token is not None or not _is_loopback(self.host)

    def check(self) -> None:
        if not _is_loopback(self.host) and not self.admin_token:
            raise ServerConfigError(
                f"listening on {self.host} (beyond loopback) needs DAGWRIGHT_ADMIN_TOKEN: "
                "the editor API would otherwise be open to the network"
            )
        if self.rate_limit <= 0:
            raise ServerConfigError("DAGWRIGHT_RATE_LIMIT must be a positive number")
        if not 0 < self.run_timeout < float("inf"):
            raise ServerConfigError("DAGWRIGHT_RUN_TIMEOUT must be a positive number of seconds")
