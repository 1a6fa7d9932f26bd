"""HTTP/1.1 to a model provider: JSON POSTs over a keep-alive connection pool on asyncio
streams, answers read whole or line by line (server-sent events).

Why not the `openai` client over httpx: with 200 calls in flight httpx's pool re-examines every
connection (probing idle sockets) on every request, and the client converts each request and
answer through its typed models; together ~5.7 ms of CPU per call, against ~0.6 ms for this
(benchmarks/llm_throughput.py prints both). A provider's API is a few JSON POSTs, some
answered as a stream of events: that is all this speaks. Retries are the gateway's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

_MAX_HEAD = 64 * 1024
_CHUNK_END = -1  # a chunk's data has all arrived; the CRLF closing it is next


class TransportError(Exception):
    """The connection failed or broke before the whole answer arrived."""


class TimedOut(TransportError):
    """The provider sent nothing for `timeout` seconds."""


@dataclass(slots=True)
class _Link:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter

    def usable(self) -> bool:
        # A server that closed an idle keep-alive connection has fed EOF by now.
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class _Dechunker:
    """Chunked transfer coding undone over whatever bytes have arrived, so that the many small
    chunks of a streamed answer cost one read of the socket, not two reads each."""

    __slots__ = ("_left", "_raw", "done")

    def __init__(self) -> None:
        self.done = False
        self._raw = bytearray()
        self._left = 0  # bytes of the current chunk still to come, or _CHUNK_END

    def feed(self, data: bytes) -> None:
        self._raw += data

    def take(self) -> bytes:
        """The body bytes decodable from what has arrived (b"" when more must arrive)."""
        raw, out = self._raw, bytearray()
        while not self.done:
            if self._left > 0:  # inside a chunk's data
                piece = raw[: self._left]
                out += piece
                del raw[: len(piece)]
                self._left -= len(piece)
                if self._left:
                    break
                self._left = _CHUNK_END
            if self._left == _CHUNK_END:
                if len(raw) < 2:
                    break
                del raw[:2]
                self._left = 0
            end = raw.find(b"\r\n")
            if end < 0:
                break
            size = int(bytes(raw[:end]).split(b";", 1)[0], 16)
            if size == 0:
                # The last chunk: any trailers, then a blank line.
                self.done = raw.find(b"\r\n\r\n", end) >= 0
                break
            del raw[: end + 2]
            self._left = size
        return bytes(out)


@dataclass(slots=True)
class Answer:
    """A response whose head has arrived; its body is read with `read` or `lines`."""

    status: int
    headers: dict[str, str]  # names in lower case
    _link: _Link
    _timeout: float
    _chunks: _Dechunker | None  # None: not chunked
    _length: int | None  # None with neither a length nor chunks: the body ends at EOF
    _buffer: bytearray = field(default_factory=bytearray)
    complete: bool = False

    async def _next_piece(self) -> bytes:
        """The next bytes of the body; b"" once it has all arrived."""
        try:
            return await self._receive()
        except TimeoutError:
            raise TimedOut("timed out") from None
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            raise TransportError("the connection broke during the answer") from None

    async def _receive(self) -> bytes:
        reader = self._link.reader
        chunks = self._chunks
        if chunks is not None:
            while not (piece := chunks.take()):
                if chunks.done:
                    self.complete = True
                    return b""
                async with asyncio.timeout(self._timeout):
                    data = await reader.read(65536)
                if not data:
                    raise asyncio.IncompleteReadError(b"", None)
                chunks.feed(data)
            return piece
        if self._length is not None:
            if self._length == 0:
                self.complete = True
                return b""
            async with asyncio.timeout(self._timeout):
                piece = await reader.read(self._length)
            if not piece:
                raise asyncio.IncompleteReadError(b"", self._length)
            self._length -= len(piece)
            return piece
        async with asyncio.timeout(self._timeout):
            piece = await reader.read(65536)
        if not piece:
            self.complete = True
        return piece

    async def read(self) -> bytes:
        """The whole body."""
        parts = []
        while piece := await self._next_piece():
            parts.append(piece)
        return b"".join(parts)

    async def lines(self) -> AsyncIterator[bytes]:
        """The body line by line, without line ends, as it arrives."""
        buffer = self._buffer
        while piece := await self._next_piece():
            buffer += piece
            start = 0
            while (end := buffer.find(b"\n", start)) >= 0:
                yield bytes(buffer[start:end]).rstrip(b"\r")
                start = end + 1
            del buffer[:start]
        if buffer:
            yield bytes(buffer)
            buffer.clear()


class Origin:
    """Keep-alive connections to one scheme://host:port, for one event loop."""

    def __init__(self, base_url: str, headers: dict[str, str], timeout: float) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base_url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.tls = parts.scheme == "https"
        self.timeout = timeout
        default_port = self.port == (443 if self.tls else 80)
        authority = self.host if default_port else f"{self.host}:{self.port}"
        fixed = {
            "Host": authority,
            "User-Agent": "dagwright",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            **headers,
        }
        self._fixed_head = "".join(f"{name}: {value}\r\n" for name, value in fixed.items())
        self._idle: list[_Link] = []
        self._tls_context: ssl.SSLContext | None = None

    def _context(self) -> ssl.SSLContext | None:
        if self.tls and self._tls_context is None:
            import certifi  # httpx's own CA bundle, so the same servers are trusted

            self._tls_context = ssl.create_default_context(cafile=certifi.where())
        return self._tls_context

    async def _connect(self) -> _Link:
        context = self._context()
        try:
            async with asyncio.timeout(self.timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=context, limit=_MAX_HEAD
                )
        except TimeoutError:
            raise TimedOut("timed out connecting") from None
        except OSError as exc:
            raise TransportError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        return _Link(reader, writer)

    @asynccontextmanager
    async def post(self, path: str, payload: dict[str, Any]) -> AsyncIterator[Answer]:
        """POST `payload` as JSON to the base URL's path + `path`; the answer's head is read,
        its body is the caller's to read. The connection goes back to the pool when the
        body was read to its end."""
        body = json.dumps(payload, ensure_ascii=False).encode()
        head = (
            f"POST {self.prefix}{path} HTTP/1.1\r\n{self._fixed_head}"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        answer = await self._send(head + body)
        try:
            yield answer
        finally:
            if answer.complete and answer.headers.get("connection", "").lower() != "close":
                self._idle.append(answer._link)
            else:
                answer._link.close()

    async def _send(self, request: bytes) -> Answer:
        while self._idle:
            link = self._idle.pop()
            if not link.usable():
                link.close()
                continue
            try:
                return await self._exchange(link, request)
            except (ConnectionError, asyncio.IncompleteReadError) as exc:
                if isinstance(exc, asyncio.IncompleteReadError) and exc.partial:
                    raise TransportError("the connection broke during the answer") from None
                # The server closed this kept-alive connection as we sent: try a new one.
        link = await self._connect()
        try:
            return await self._exchange(link, request)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            raise TransportError(f"the connection broke: {exc or type(exc).__name__}") from None

    async def _exchange(self, link: _Link, request: bytes) -> Answer:
        """Send the request and read the answer's head; the link is closed on any failure."""
        try:
            link.writer.write(request)
            async with asyncio.timeout(self.timeout):
                await link.writer.drain()
                head = await link.reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            link.close()
            raise TimedOut("timed out") from None
        except asyncio.LimitOverrunError:
            link.close()
            raise TransportError("the answer's head is too large") from None
        except BaseException:
            link.close()
            raise
        lines = head.decode("latin-1").split("\r\n")
        try:
            version, status, *_ = lines[0].split(" ", 2)
            code = int(status)
        except ValueError:
            link.close()
            raise TransportError(f"not an HTTP answer: {lines[0][:80]!r}") from None
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length = None if chunked else headers.get("content-length")
        if version != "HTTP/1.1":
            headers["connection"] = "close"
        return Answer(
            status=code,
            headers=headers,
            _link=link,
            _timeout=self.timeout,
            _chunks=_Dechunker() if chunked else None,
            _length=int(length) if length is not None else None,
        )

    async def aclose(self) -> None:
        links, self._idle = self._idle, []
        for link in links:
            link.close()
        for link in links:
            with contextlib.suppress(ConnectionError, ssl.SSLError):  # closing anyway
                await link.writer.wait_closed()
