"""Blocks for the server tests, loaded by the server from DAGWRIGHT_BLOCKS_PATH: a value
passed on after a wait, so that a run is really in progress while a test looks at it."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from dagwright.registry import block


class SlowEchoConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    seconds: float = Field(1.0, ge=0, le=3600, description="How long to wait before answering.")


@block(
    "slow_echo",
    category="data_process",
    description="Wait, then pass the value on unchanged.",
    example="seconds 2, 'hi' -> 'hi' (two seconds later)",
)
async def slow_echo(config: SlowEchoConfig, value: Any) -> Any:
    """Awaits `seconds` (without holding up the event loop or a thread), then returns the
    value it was given. Cancelling the run interrupts the wait at once."""
    await asyncio.sleep(config.seconds)
    return value
