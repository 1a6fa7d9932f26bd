"""Whether a database source reaches the server's own store.

A PostgreSQL or MySQL source over the database dagwright keeps its own tables in would let
anyone who may add a source read them through SQL: the API keys' hashes, the runs, and the
secrets (which, with the secret key, decrypt). A source is refused when its server is the
store's server, whatever the host is called (localhost, 127.0.0.1, ::1, 0.0.0.0, this
machine's name or addresses, a Unix socket: all are this machine) and whichever port spells
the default, and it reaches the store's database: on PostgreSQL the same database (one
connection reads one database), on MySQL the store's database among those it exposes (a
MySQL connection reads every database it may, so a source naming none exposes them all).

The check runs when a source is added and again each time a connection is opened: a host
name may resolve elsewhere later, and a stored source (or one in the settings file) is
checked too. SQLite and file sources are kept out of the store by ``SourcePaths``.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

from dagwright.errors import DataError

# This machine, whatever the address: loopback, unspecified, or one of its own.
LOCAL = "this machine"
DEFAULT_PORTS = {"postgres": 5432, "mysql": 3306}
PROTOCOLS = {
    "postgresql": "postgres",
    "postgres": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "tidb": "mysql",
}


class OwnStoreError(DataError):
    """A source whose server and database are the server's own store (HTTP 400, code
    ``source_is_own_store``)."""

    code = "source_is_own_store"


@dataclass(frozen=True, slots=True)
class ServerAddress:
    """Where a database URL connects: its protocol, hosts (a list in libpq), port and
    database (None: not named)."""

    protocol: str
    hosts: tuple[str, ...]
    port: int
    database: str | None

    @classmethod
    def parse(cls, url: str) -> ServerAddress | None:
        """The address of a postgresql:// or mysql:// URL (SQLAlchemy's `+driver` schemes
        too); None for any other URL."""
        parts = urlsplit(url)
        protocol = PROTOCOLS.get(parts.scheme.split("+", 1)[0].lower())
        if protocol is None:
            return None
        query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
        # libpq takes host, hostaddr, port and dbname from the query too (and they win);
        # PyMySQL's unix_socket is a host on this machine.
        netloc = parts.netloc.rpartition("@")[2]
        given = query.get("host") or query.get("hostaddr") or query.get("unix_socket")
        hosts = given.split(",") if given else _netloc_hosts(netloc)
        try:
            port = int(query.get("port") or parts.port or DEFAULT_PORTS[protocol])
        except ValueError:
            port = DEFAULT_PORTS[protocol]
        database = query.get("dbname") or unquote(parts.path.lstrip("/")) or None
        if database is None and protocol == "postgres" and parts.username:
            database = unquote(parts.username)  # libpq's default database: the user's name
        return cls(protocol, tuple(h.strip() for h in hosts), port, database)


def _netloc_hosts(netloc: str) -> list[str]:
    # libpq's multi-host form host1:port1,host2:port2; the port is handled apart.
    hosts = []
    for item in netloc.split(","):
        host = item[1 : item.index("]")] if item.startswith("[") else item.rpartition(":")[0]
        hosts.append(host if item.count(":") == 1 or item.startswith("[") else item)
    return hosts or [""]


@functools.cache
def _own_addresses() -> frozenset[str]:
    """This machine's addresses as its name resolves (besides loopback)."""
    found: set[str] = set()
    for name in {socket.gethostname(), socket.getfqdn()}:
        try:
            found.update(str(info[4][0]) for info in socket.getaddrinfo(name, None))
        except OSError:
            continue
    return frozenset(found)


def _machines(host: str) -> set[str]:
    """Which machines ``host`` names: LOCAL for this one, else its addresses (or the name,
    lower-cased, when it does not resolve)."""
    if not host or host.startswith("/") or host.startswith("@"):
        return {LOCAL}  # a Unix socket (libpq's default too), or an abstract one
    try:
        infos = socket.getaddrinfo(host, None)
    except (OSError, UnicodeError):
        return {host.lower()}
    machines = set()
    own = _own_addresses()
    for info in infos:
        text = str(info[4][0]).split("%", 1)[0]
        address = ipaddress.ip_address(text)
        mapped = getattr(address, "ipv4_mapped", None)
        address = mapped or address
        local = address.is_loopback or address.is_unspecified or str(address) in own
        machines.add(LOCAL if local else str(address))
    return machines


@dataclass(frozen=True, slots=True)
class OwnStore:
    """The server's own database, to keep sources away from it."""

    address: ServerAddress

    @classmethod
    def from_url(cls, database_url: str | None) -> OwnStore | None:
        """None for SQLite (its file is kept out by ``SourcePaths``) or no URL."""
        address = ServerAddress.parse(database_url) if database_url else None
        return cls(address) if address is not None else None

    def reached_by(self, url: str, schemas: Sequence[str] | None) -> bool:
        """Whether a source at ``url`` exposing ``schemas`` (None: its default) reads the
        store's database."""
        source = ServerAddress.parse(url)
        store = self.address
        if source is None or source.protocol != store.protocol or source.port != store.port:
            return False
        mine = set().union(*(_machines(host) for host in store.hosts))
        theirs = set().union(*(_machines(host) for host in source.hosts))
        if not mine & theirs:
            return False
        if store.database is None or (source.database is None and store.protocol == "postgres"):
            return True  # the database is not known: the same server is reason enough
        if store.protocol == "postgres":
            return source.database == store.database
        # MySQL: the databases the source exposes (schemas, else the URL's, else all).
        exposed = list(schemas) if schemas is not None else None
        if exposed is None and source.database is not None:
            exposed = [source.database]
        return exposed is None or store.database.lower() in (s.lower() for s in exposed)

    def check(self, url: str, schemas: Sequence[str] | None, source: str) -> None:
        """OwnStoreError when a source at ``url`` reaches the store."""
        if self.reached_by(url, schemas):
            raise OwnStoreError(
                f"source {source!r}: {url!r} reaches this server's own database (its apps,"
                " keys and secrets); a data source may not read it. Give the data its own"
                " database",
                source=source,
            )
