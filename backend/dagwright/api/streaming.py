"""Runs as server-sent events: every runtime event (node states, LLM token deltas, usage) as
it happens, then the recorded result once it is committed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from fastapi.sse import format_sse_event
from pydantic_core import PydanticSerializationError, to_json, to_jsonable_python

from dagwright.api.jsontext import dumps
from dagwright.services.runs.recorder import LiveRun
from dagwright.services.runs.records import RunRecord


def jsonable(value: Any) -> Any:
    return to_jsonable_python(value, fallback=repr)


def result_body(record: RunRecord) -> dict[str, Any]:
    """What a finished run answers: the same for sync calls, polling and the stream's end."""
    return {
        "run_id": record.id,
        "app_id": record.app_id,
        "version_id": record.version_id,
        "status": record.status,
        "outputs": record.outputs,
        "error": record.error,
        "usage": record.usage,
        "duration": record.duration,
    }


def sse(data: Any, event: str, id: str | None = None) -> bytes:
    """One server-sent event, its data as JSON."""
    try:
        text = to_json(data, fallback=repr).decode()
    except PydanticSerializationError:  # a lone surrogate (an old row): made U+FFFD
        text = dumps(jsonable(data)).decode()
    return format_sse_event(data_str=text, event=event, id=id)


KEEPALIVE_S = 15.0  # a comment line this often while a node is silent
KEEPALIVE = b": keep-alive\n\n"


async def with_keepalive(
    events: AsyncIterator[bytes], interval: float = KEEPALIVE_S
) -> AsyncIterator[bytes]:
    """The events, with an SSE comment whenever none came for `interval` seconds: proxies
    keep the connection open, and a client can tell a silent node from a dead connection."""
    pending: asyncio.Task[bytes] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=interval)
            if not done:
                yield KEEPALIVE
                continue
            try:
                chunk = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield chunk
    finally:
        if pending is not None:
            pending.cancel()


async def _run_events(live: LiveRun, skip: int) -> AsyncIterator[bytes]:
    index = 0
    async for event in live.run.stream():
        if index >= skip:
            yield sse(event.to_dict(), event.type, str(index))
        index += 1
    record = await live.wait()
    yield sse(result_body(record), "result", str(index))


def run_events(
    live: LiveRun, skip: int = 0, keepalive_s: float = KEEPALIVE_S
) -> AsyncIterator[bytes]:
    """The run's events from number `skip` on (a reconnecting client sends Last-Event-ID),
    then a `result` event once the run is recorded; a keep-alive comment every
    `keepalive_s` seconds of silence."""
    return with_keepalive(_run_events(live, skip), keepalive_s)
