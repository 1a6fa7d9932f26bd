"""Blocks used only by the tests: sleeps, failures, wrong types, conditions, messages."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final, TypedDict

from pydantic import BaseModel

from dagwright.registry import ModelCall, NodeContext, Route, Service, Usage, block


class ValueConfig(BaseModel):
    value: Any = None


class SleepConfig(BaseModel):
    seconds: float = 0.1


class MessageConfig(BaseModel):
    message: str = "boom"


@block("t_const", category="data_process", description="A constant.", inline=True)
def t_const(config: ValueConfig) -> Any:
    """Returns config.value."""
    return config.value


@block("t_add", category="data_process", description="a + b.", inline=True)
def t_add(a: int, b: int = 0) -> int:
    """Adds two integers."""
    return a + b


@block("t_upper", category="data_process", description="Upper-case text.", inline=True)
def t_upper(text: str) -> str:
    """Upper-cases its input."""
    return text.upper()


@block("t_sleep", category="data_process", description="Wait, then pass x on.")
async def t_sleep(config: SleepConfig, x: Any = None) -> Any:
    """Awaits config.seconds."""
    await asyncio.sleep(config.seconds)
    return x


@block("t_sleep_sync", category="data_process", description="Block, then pass x on.")
def t_sleep_sync(config: SleepConfig, x: Any = None) -> Any:
    """Blocks its worker thread for config.seconds."""
    time.sleep(config.seconds)
    return x


@block("t_fail", category="data_process", description="Always raises.")
async def t_fail(config: MessageConfig, x: Any = None) -> Any:
    """Raises ValueError(config.message)."""
    raise ValueError(config.message)


@block("t_wrong_type", category="data_process", description="Lies about its type.", inline=True)
def t_wrong_type(x: Any = None) -> int:
    """Declares int, returns text."""
    return "not a number"  # type: ignore[return-value]


@block("t_none", category="data_process", description="Returns None.", inline=True)
def t_none(x: Any = None) -> int | None:
    """A legitimate None output."""
    return None


@block(
    "t_is_positive",
    category="condition",
    description="Route on the sign.",
    branches=("true", "false"),
    inline=True,
)
def t_is_positive(x: int) -> Route[int]:
    """true when x > 0."""
    return Route("true" if x > 0 else "false", x)


class Pair(TypedDict):
    left: int
    right: str


@block("t_pair", category="data_process", description="Two outputs.", inline=True)
def t_pair(x: int) -> Pair:
    """left = x, right = str(x)."""
    return {"left": x, "right": str(x)}


@block("t_emit", category="data_process", description="Reports progress.")
async def t_emit(ctx: NodeContext, x: Any = None) -> str:
    """Emits two deltas."""
    ctx.emit("delta", text="hel")
    await asyncio.sleep(0)
    ctx.emit("delta", text="lo")
    return "hello"


@block("t_emit_sync", category="data_process", description="Reports progress from a thread.")
def t_emit_sync(ctx: NodeContext, x: Any = None) -> str:
    """Emits one delta from its worker thread."""
    ctx.emit("delta", text="hi")
    return "hi"


class Greeter:
    """A stand-in service, handed to blocks through ExecutorOptions.services."""

    def __init__(self, greeting: str) -> None:
        self.greeting = greeting


GREETER: Final[Service[Greeter]] = Service("greeter", "a test's greeter")


@block(
    "t_metered",
    category="data_process",
    description="Uses a service, records usage.",
    needs=(GREETER,),
)
async def t_metered(ctx: NodeContext, x: Any = None) -> str:
    """Asks the run for a Greeter and accounts for a pretend model call."""
    greeter = ctx.service(GREETER)
    ctx.record_usage(
        Usage(prompt_tokens=10, completion_tokens=5, cost=0.5, calls=1), ModelCall(model="m")
    )
    return greeter.greeting


class Gauge:
    """Counts the t_gauged nodes running at once, across every run that shares it."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0


GAUGE: Final[Service[Gauge]] = Service("gauge", "a test's gauge")


@block("t_gauged", category="data_process", description="Counted while it sleeps.", needs=(GAUGE,))
async def t_gauged(config: SleepConfig, ctx: NodeContext, x: Any = None) -> Any:
    """Sleeps config.seconds, counted by the run's Gauge service."""
    gauge = ctx.service(GAUGE)
    gauge.active += 1
    gauge.peak = max(gauge.peak, gauge.active)
    try:
        await asyncio.sleep(config.seconds)
    finally:
        gauge.active -= 1
    return x
