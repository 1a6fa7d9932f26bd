"""Runs as server-sent events: every runtime event (node states, LLM token deltas, usage) as
it happens, then the recorded result once it is committed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from fastapi.sse import format_sse_event
from pydantic_core import to_json, to_jsonable_python

from dagwright.services.runs import LiveRun, RunRecord


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
    text = to_json(data, fallback=repr).decode()
    return format_sse_event(data_str=text, event=event, id=id)


async def run_events(live: LiveRun, skip: int = 0) -> AsyncIterator[bytes]:
    """The run's events from number `skip` on (a reconnecting client sends Last-Event-ID),
    then a `result` event once the run is recorded."""
    index = 0
    async for event in live.run.stream():
        if index >= skip:
            yield sse(event.to_dict(), event.type, str(index))
        index += 1
    record = await live.wait()
    yield sse(result_body(record), "result", str(index))
