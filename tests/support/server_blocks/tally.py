"""Blocks for the queue tests, loaded by servers and workers from DAGWRIGHT_BLOCKS_PATH:
each call appends "<run id> <node>" to a file shared by every process of the test, so the
test counts how often each node really ran, on whichever worker, across crashes."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dagwright.registry import NodeContext, block


class TallyConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str = Field(description="The file each call appends '<run id> <node>' to.")
    seconds: float = Field(0.0, ge=0, le=3600, description="How long to wait after counting.")
    hold: str | None = Field(None, description="While this file exists, wait (then `seconds`).")


def _count(config: TallyConfig, context: NodeContext) -> None:
    line = f"{context.run_id} {context.node_id}\n".encode()
    # One write of a short line in append mode: lines of several processes never interleave.
    fd = os.open(config.file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


async def _wait(config: TallyConfig) -> None:
    # The hold is a file that the test, another process, removes: polled, no event to await.
    while config.hold is not None:
        if not await asyncio.to_thread(os.path.exists, config.hold):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(config.seconds)


@block(
    "tally",
    category="data_process",
    description="Count the call in a file, wait, then pass the value on.",
    side_effects="retryable",
)
async def tally(config: TallyConfig, context: NodeContext, value: Any) -> Any:
    """Appends this call to the file, waits `seconds`, returns the value it was given. A
    side effect that may happen again when a run resumes after a crash."""
    _count(config, context)
    await _wait(config)
    return value


@block(
    "tally_once",
    category="data_process",
    description="Count the call in a file, wait, then pass the value on; never twice.",
    side_effects="not_retryable",
)
async def tally_once(config: TallyConfig, context: NodeContext, value: Any) -> Any:
    """As tally, for a side effect that must not happen twice: a run whose worker died
    while it ran fails instead of calling it again."""
    _count(config, context)
    await _wait(config)
    return value
