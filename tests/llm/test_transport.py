"""The gateway's HTTP/1.1 client against small real servers on loopback: chunked bodies cut
anywhere, keep-alive reuse, a server that closed its idle connection, answers that end at
EOF, and a server that never answers."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from dagwright.llm.transport import Origin, TimedOut, _Dechunker

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def chunked(*parts: bytes, trailers: bytes = b"") -> bytes:
    body = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts)
    return body + b"0\r\n" + trailers + b"\r\n"


@pytest.mark.parametrize("trailers", [b"", b"X-Checksum: 1\r\n"])
def test_chunks_decode_however_the_bytes_arrive(trailers: bytes) -> None:
    parts = [b"data: one\n\n", b"data: two\n", b"\n", b"x" * 300]
    wire = chunked(*parts, trailers=trailers)
    for step in (1, 2, 7, len(wire)):
        decoder = _Dechunker()
        out = b""
        for at in range(0, len(wire), step):
            decoder.feed(wire[at : at + step])
            out += decoder.take()
        assert out == b"".join(parts)
        assert decoder.done


async def read_request(reader: asyncio.StreamReader) -> dict[str, object]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length")
    )
    parsed: dict[str, object] = json.loads(await reader.readexactly(length))
    return parsed


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()


async def test_keep_alive_reuses_a_connection_and_replaces_a_closed_one() -> None:
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(len(connections))
        answered = 0
        while answered < 2:  # two answers per connection, then the server closes it
            try:
                request = await read_request(reader)
            except asyncio.IncompleteReadError:
                break
            body = json.dumps({"echo": request["n"]}).encode()
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            answered += 1
        writer.close()

    async with serving(handler) as base_url:
        origin = Origin(base_url, {}, timeout=5)
        echoes = []
        for n in range(5):
            async with origin.post("/echo", {"n": n}) as answer:
                echoes.append(json.loads(await answer.read())["echo"])
            await asyncio.sleep(0.05)  # lets the server's close arrive
        await origin.aclose()
    assert echoes == [0, 1, 2, 3, 4]
    assert len(connections) == 3  # 2 + 2 + 1 answers


async def test_streamed_lines_and_a_body_that_ends_at_eof() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await read_request(reader)
        if request["kind"] == "stream":
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
            for part in (b"data: 1\n", b"\ndata: 2\n\n", b"data: [DONE]\n\n"):
                writer.write(b"%x\r\n%s\r\n" % (len(part), part))
                await writer.drain()
                await asyncio.sleep(0.01)
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        else:
            writer.write(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")
        writer.close()  # one answer per connection: the second request needs a new one

    async with serving(handler) as base_url:
        origin = Origin(base_url, {}, timeout=5)
        async with origin.post("/s", {"kind": "stream"}) as answer:
            lines = [line async for line in answer.lines()]
        async with origin.post("/e", {"kind": "eof"}) as answer:
            body = await answer.read()
        await origin.aclose()
    assert [line for line in lines if line] == [b"data: 1", b"data: 2", b"data: [DONE]"]
    assert body == b"until the end"


async def test_a_silent_server_times_out() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async with serving(handler) as base_url:
        origin = Origin(base_url, {}, timeout=0.2)
        with pytest.raises(TimedOut):
            async with origin.post("/slow", {}) as answer:
                await answer.read()
        await origin.aclose()
