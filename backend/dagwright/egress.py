"""The one outbound-traffic (egress) policy: which addresses dagwright may connect to when a
flow author or an API caller names the target (http_request, mcp_tool, invoke_remote, the
http_json connector, `/api/v1/mcp/tools`).

Denied unless an operator allows them (DAGWRIGHT_EGRESS_ALLOW): loopback, link-local (the
cloud metadata address 169.254.169.254 among them), private and shared ranges, unique-local
IPv6, multicast, unspecified (0.0.0.0, ::), reserved and documentation ranges (anything
Python's `ipaddress` says is not global), the same inside IPv4-mapped, 6to4, Teredo and NAT64
IPv6 forms, and the server's own addresses.

The check is on resolved addresses, at connect time: `dagwright.egress_http` gives httpx a
network backend that resolves the host, checks every address and connects to the checked
one, so a name that resolves differently a second time (DNS rebinding) gains nothing. Host
names are resolved as the OS resolves them, so numeric spellings (2130706433, 0x7f.1,
017700000001, 127.1) reach the check as the address they mean.

This module imports only the standard library: every layer may use it.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from dagwright.errors import ForbiddenError

ALLOW_ENV: Final = "DAGWRIGHT_EGRESS_ALLOW"

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
# host, port -> the addresses the host resolves to (the OS resolver unless a test gives one)
Resolver = Callable[[str, int], Sequence[str]]

_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")


class EgressDeniedError(ForbiddenError):
    """A connection the egress policy refuses: the message names the host, the address and
    why (HTTP 403 where an API caller named the target)."""

    code = "egress_denied"

    def __init__(self, message: str) -> None:
        super().__init__(message, "egress_denied")


def os_resolver(host: str, port: int) -> list[str]:
    """The addresses the OS resolver gives for host (numeric spellings included)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: dict[str, None] = {}
    for _family, _type, _proto, _name, sockaddr in infos:
        seen.setdefault(str(sockaddr[0]).split("%", 1)[0], None)
    return list(seen)


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 form carries (mapped, 6to4, Teredo, NAT64), if any: the
    network may route it to that IPv4 address."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def why_denied(address: IpAddress) -> str | None:
    """Why an address is not one to connect to by default, or None when it is public."""
    if isinstance(address, ipaddress.IPv6Address):
        inner = _embedded_ipv4(address)
        if inner is not None:
            reason = why_denied(inner)
            return None if reason is None else f"{reason} (inside an IPv6 address)"
    if address.is_unspecified:
        return "an unspecified address (it means this host)"
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv6Address) and address in ipaddress.ip_network("fc00::/7"):
        return "a unique-local address"
    if address.is_private:
        return "a private address"
    if not address.is_global:
        return "an address that is not globally routable"
    return None


@dataclass(frozen=True, slots=True)
class AllowRule:
    """One entry of the operator's allow list: a host name or an address range, with or
    without a port."""

    name: str | None = None
    network: IpNetwork | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> AllowRule:
        entry = text.strip()
        if not entry:
            raise ValueError("an empty entry")
        port: int | None = None
        host = entry
        if entry.startswith("["):  # [::1] or [::1]:8080
            host, _, rest = entry[1:].partition("]")
            if rest:
                port = _port(entry, rest.removeprefix(":") if rest.startswith(":") else "x")
        elif entry.count(":") == 1:  # host:port or 10.0.0.1:80 (bare IPv6 has more colons)
            host, _, port_text = entry.partition(":")
            port = _port(entry, port_text)
        try:
            return cls(network=ipaddress.ip_network(host, strict=False), port=port)
        except ValueError:
            pass
        name = host.rstrip(".").lower()
        if not name or any(c in name for c in "/@?#\\ "):
            raise ValueError(f"{entry!r} is not a host name, an address or a CIDR range")
        return cls(name=name, port=port)

    def matches(self, host: str, port: int, address: IpAddress | None) -> bool:
        if self.port is not None and self.port != port:
            return False
        if self.name is not None:
            return _normal_host(host) == self.name
        assert self.network is not None
        return (
            address is not None
            and address.version == self.network.version
            and (address in self.network)
        )


def _port(entry: str, text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{entry!r}: the port must be a number from 1 to 65535")
    return int(text)


def _normal_host(host: str) -> str:
    return host.strip("[]").rstrip(".").lower()


def parse_allow_list(text: str) -> tuple[AllowRule, ...]:
    """The rules of a comma-separated allow list (host names, host:port, addresses, CIDR
    ranges); ValueError naming a bad entry."""
    return tuple(AllowRule.parse(part) for part in text.split(",") if part.strip())


class EgressPolicy:
    """Where outbound connections may go: public addresses, and what the operator allows.

    `own_addresses` are this server's addresses (refused even when public); `resolver` is the
    seam tests feed (the OS resolver by default)."""

    __slots__ = ("_allow", "_own", "_resolver")

    def __init__(
        self,
        allow: Iterable[AllowRule] = (),
        own_addresses: Iterable[str] = (),
        resolver: Resolver | None = None,
    ) -> None:
        self._allow = tuple(allow)
        self._own = frozenset(ipaddress.ip_address(a) for a in own_addresses)
        self._resolver = resolver or os_resolver

    @classmethod
    def from_text(cls, allow: str, own_addresses: Iterable[str] = ()) -> EgressPolicy:
        return cls(parse_allow_list(allow), own_addresses)

    def with_resolver(self, resolver: Resolver) -> EgressPolicy:
        return EgressPolicy(self._allow, [str(a) for a in self._own], resolver)

    def check_address(self, host: str, port: int, address: str) -> IpAddress:
        """The address, parsed, when a connection to it (as host:port) is allowed; else
        EgressDeniedError naming host, address and reason."""
        ip = ipaddress.ip_address(address)
        if any(rule.matches(host, port, ip) for rule in self._allow):
            return ip
        reason = why_denied(ip)
        if reason is None and ip in self._own:
            reason = "this server's own address"
        if reason is not None:
            shown = host if _normal_host(host) == str(ip) else f"{host} ({ip})"
            raise EgressDeniedError(
                f"connecting to {shown} port {port} is not allowed: it is {reason}; an "
                f"operator may allow it in {ALLOW_ENV}"
            )
        return ip

    def resolve(self, host: str, port: int) -> list[str]:
        """Every address host resolves to, each checked: EgressDeniedError when any is
        refused (a name that mixes public and internal addresses is refused whole). An
        unknown host raises OSError, as connecting would."""
        addresses = list(self._resolver(_normal_host(host), port))
        if not addresses:
            raise OSError(f"{host} resolves to no address")
        for address in addresses:
            self.check_address(host, port, address)
        return addresses


def own_addresses(bind_host: str | None = None) -> list[str]:
    """This host's addresses as far as it knows them: its name's addresses and the address
    the server listens on (loopback and private ones are refused anyway)."""
    found: dict[str, None] = {}
    try:
        for address in os_resolver(socket.gethostname(), 0):
            found.setdefault(address, None)
    except OSError:
        pass
    if bind_host:
        try:
            ip = ipaddress.ip_address(bind_host.strip("[]"))
        except ValueError:
            pass
        else:
            if not ip.is_unspecified:
                found.setdefault(str(ip), None)
    return list(found)
