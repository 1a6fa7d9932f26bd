"""The keep-alive of run streams: a comment line while a node is silent, never between two
events that follow each other closely, and the events themselves untouched."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from dagwright.api.streaming import KEEPALIVE, with_keepalive


async def _slow(delays: list[float]) -> AsyncIterator[bytes]:
    for number, delay in enumerate(delays):
        await asyncio.sleep(delay)
        yield f"event {number}\n\n".encode()


async def test_a_silent_stream_gets_keepalive_comments() -> None:
    chunks = [c async for c in with_keepalive(_slow([0.0, 0.25, 0.0]), interval=0.1)]
    events = [c for c in chunks if c != KEEPALIVE]
    assert events == [b"event 0\n\n", b"event 1\n\n", b"event 2\n\n"]
    between = chunks[1 : chunks.index(b"event 1\n\n")]
    assert between == [KEEPALIVE, KEEPALIVE]  # 0.25 s of silence at 0.1 s intervals
    assert chunks[-2:] == [b"event 1\n\n", b"event 2\n\n"]


async def test_a_busy_stream_gets_none() -> None:
    chunks = [c async for c in with_keepalive(_slow([0.0] * 50), interval=0.5)]
    assert KEEPALIVE not in chunks
    assert len(chunks) == 50
