"""The gateway's split of a server-sent event stream into its `data:` fields (gateway.py
`_sse_data`), whatever the chunks the body arrives in."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from dagwright.llm.gateway import _sse_data

STREAM = b'data: {"a": 1}\n\n: a comment\nevent: x\ndata: {"b": "\xc3\xa9"}\n\ndata: [DONE]\n\n'
EXPECTED = [b'{"a": 1}', b'{"b": "\xc3\xa9"}', b"[DONE]"]


async def fields(chunks: list[bytes]) -> list[bytes]:
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    return [data async for data in _sse_data(body())]


@pytest.mark.parametrize("size", [1, 2, 3, 7, len(STREAM)])
async def test_any_chunking_gives_the_same_fields(size: int) -> None:
    chunks = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    assert await fields(chunks) == EXPECTED


@pytest.mark.parametrize("ending", [b"\r\n", b"\r"])
async def test_crlf_and_cr_end_lines_too(ending: bytes) -> None:
    stream = STREAM.replace(b"\n", ending)
    for size in (1, 2, 5, len(stream)):
        chunks = [stream[i : i + size] for i in range(0, len(stream), size)]
        assert await fields(chunks) == EXPECTED


async def test_a_last_line_without_its_newline_still_counts() -> None:
    assert await fields([b'data: {"a": 1}\n\ndata:{"z": 0}']) == [b'{"a": 1}', b'{"z": 0}']
