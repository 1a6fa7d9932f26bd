"""The server's settings: the process's (settings.py) with the `dagwright serve` options,
checked for what a server must not start with."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from pathlib import Path

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
    # Everything else the process is configured with (model providers, data sources...);
    # None: read when the server starts (`composed()`).
    process: Settings | None = None

    @classmethod
    def from_env(cls, host: str | None = None, port: int | None = None) -> ServerSettings:
        """The process's settings (environment, settings file) with these options."""
        return cls.from_settings(load_settings(), host, port)

    @classmethod
    def from_settings(
        cls, process: Settings, host: str | None = None, port: int | None = None
    ) -> ServerSettings:
        settings = cls(
            host=host or process.host,
            port=port or process.port,
            data_dir=process.data_dir,
            database_url=process.database_url,
            admin_token=process.admin_token,
            cors_origins=process.cors_origin_list,
            rate_limit=process.rate_limit,
            replica=process.replica,
            max_body_bytes=process.max_body_bytes,
            run_timeout=process.run_timeout,
            process=process,
        )
        settings.check()
        return settings

    def composed(self) -> Settings:
        """The process's settings with this server's (a test's may differ from the
        environment's): what the composition root builds the services from."""
        process = self.process if self.process is not None else load_settings()
        return process.model_copy(
            update={
                "data_dir": self.data_dir,
                "database_url": self.database_url,
                "replica": self.replica,
                "run_timeout": self.run_timeout,
            }
        )

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
