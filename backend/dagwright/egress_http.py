"""HTTP clients that obey the egress policy at connect time (dagwright/egress.py).

Each is an httpx (or httpx2, which the MCP SDK takes) client whose transport is an httpcore
connection pool over a guarded network backend, through httpcore's public network-backend
API: the backend resolves the host, checks every address with the policy and connects to a
checked address. The pool still gives httpcore the URL's host name for TLS (SNI and
certificate checks) and for the Host header, so HTTPS verifies the name that was asked for,
while the socket goes only where the policy allowed. Every connection, redirects included,
goes through it; proxies from the environment are not used (they would connect elsewhere).

Import this module where a request is made: it loads httpx and httpcore.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import anyio
import httpcore
import httpcore2
import httpx
import httpx2

from dagwright.egress import EgressPolicy


async def _resolve(policy: EgressPolicy, host: str, port: int, seconds: float | None) -> list[str]:
    # The OS resolver blocks: it runs in a worker thread, bounded by the connect timeout.
    with anyio.fail_after(seconds):
        return await anyio.to_thread.run_sync(policy.resolve, host, port, abandon_on_cancel=True)


def _unreachable(host: str, exc: OSError) -> str:
    return f"cannot resolve or reach {host}: {exc}"


# -- guarded network backends (one per httpcore flavour, same logic) --------------------------


class _GuardedAsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: EgressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            addresses = await _resolve(self._policy, host, port, timeout)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(_unreachable(host, exc)) from None
        failure: Exception | None = None
        for address in addresses:  # each one checked by resolve()
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's signature
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not an egress target")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedSyncBackend(httpcore.NetworkBackend):
    def __init__(self, policy: EgressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        try:
            addresses = self._policy.resolve(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(_unreachable(host, exc)) from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("unix sockets are not an egress target")


class _GuardedAsyncBackend2(httpcore2.AsyncNetworkBackend):
    def __init__(self, policy: EgressPolicy) -> None:
        self._policy = policy
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await _resolve(self._policy, host, port, timeout)
        except TimeoutError:
            raise httpcore2.ConnectTimeout(f"resolving {host} timed out") from None
        except OSError as exc:
            raise httpcore2.ConnectError(_unreachable(host, exc)) from None
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109  # httpcore's signature
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("unix sockets are not an egress target")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


# -- httpcore errors as the client's own (by their public names) ------------------------------


def _as_client_error(exc: Exception, client_module: Any, core_module: Any) -> Exception:
    """httpcore's exception as the httpx exception of the same name (both libraries name
    them alike: ConnectError, ReadTimeout...), so callers catch what httpx documents."""
    known = (
        core_module.TimeoutException,
        core_module.NetworkError,
        core_module.ProtocolError,
        core_module.UnsupportedProtocol,
    )
    if isinstance(exc, known):
        kind = getattr(client_module, type(exc).__name__, client_module.TransportError)
        mapped: Exception = kind(str(exc))
        return mapped
    return exc


# -- transports ---------------------------------------------------------------------------------


class _AsyncStream(httpx.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except Exception as exc:
            raise _as_client_error(exc, httpx, httpcore) from exc

    async def aclose(self) -> None:
        await self._stream.aclose()


class GuardedAsyncTransport(httpx.AsyncBaseTransport):
    """An httpx transport whose every connection the egress policy checks. `ssl_context`:
    the certificates trusted (the system's by default; tests give their own CA)."""

    def __init__(
        self,
        policy: EgressPolicy,
        max_connections: int = 20,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context or httpx.create_ssl_context(),
            max_connections=max_connections,
            network_backend=_GuardedAsyncBackend(policy),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except Exception as exc:
            raise _as_client_error(exc, httpx, httpcore) from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_AsyncStream(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _SyncStream(httpx.SyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except Exception as exc:
            raise _as_client_error(exc, httpx, httpcore) from exc

    def close(self) -> None:
        self._stream.close()


class GuardedSyncTransport(httpx.BaseTransport):
    """The blocking twin of GuardedAsyncTransport (the http_json connector's client)."""

    def __init__(self, policy: EgressPolicy, max_connections: int = 20) -> None:
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=max_connections,
            network_backend=_GuardedSyncBackend(policy),
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        core_request = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = self._pool.handle_request(core_request)
        except Exception as exc:
            raise _as_client_error(exc, httpx, httpcore) from exc
        return httpx.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_SyncStream(response.stream),
            extensions=response.extensions,
        )

    def close(self) -> None:
        self._pool.close()


class _AsyncStream2(httpx2.AsyncByteStream):
    def __init__(self, stream: Any) -> None:
        self._stream = stream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except Exception as exc:
            raise _as_client_error(exc, httpx2, httpcore2) from exc

    async def aclose(self) -> None:
        await self._stream.aclose()


class GuardedAsyncTransport2(httpx2.AsyncBaseTransport):
    """GuardedAsyncTransport for httpx2 clients (the MCP SDK's streamable HTTP)."""

    def __init__(self, policy: EgressPolicy, max_connections: int = 20) -> None:
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(),
            max_connections=max_connections,
            network_backend=_GuardedAsyncBackend2(policy),
        )

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        core_request = httpcore2.Request(
            method=request.method,
            url=httpcore2.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            response = await self._pool.handle_async_request(core_request)
        except Exception as exc:
            raise _as_client_error(exc, httpx2, httpcore2) from exc
        return httpx2.Response(
            status_code=response.status,
            headers=response.headers,
            stream=_AsyncStream2(response.stream),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


def async_client(
    policy: EgressPolicy, ssl_context: ssl.SSLContext | None = None, **options: Any
) -> httpx.AsyncClient:
    """An httpx.AsyncClient (options as httpx takes them) that obeys the policy."""
    transport = GuardedAsyncTransport(policy, ssl_context=ssl_context)
    return httpx.AsyncClient(transport=transport, **options)


def sync_client(policy: EgressPolicy, **options: Any) -> httpx.Client:
    return httpx.Client(transport=GuardedSyncTransport(policy), **options)


def async_client2(policy: EgressPolicy, **options: Any) -> httpx2.AsyncClient:
    """An httpx2.AsyncClient that obeys the policy (what the MCP SDK is given)."""
    return httpx2.AsyncClient(transport=GuardedAsyncTransport2(policy), **options)
