"""AutoTQA in a process without the server (the command line, `dagwright run` of a flow with
`autotqa_ask`): the same database, data sources, secrets and model providers the server
would use (composition.py), opened for the time of a `local_tqa()` block."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any

from dagwright.settings import Settings
from dagwright.tqa.service import TqaService


@asynccontextmanager
async def local_tqa(
    notice: Callable[[str], None] = print, settings: Settings | None = None
) -> AsyncIterator[TqaService]:
    """AutoTQA over the process's settings (`load_settings()` unless given)."""
    from dagwright.composition import Composition
    from dagwright.settings import load_settings

    process = Composition(settings or load_settings(), notice=notice, replica="cli")
    try:
        yield process.tqa()
    finally:
        await process.aclose()


class LocalTqa:
    """For `dagwright run`: each question opens the local AutoTQA and closes it after."""

    def __init__(self, settings: Settings, notice: Callable[[str], None] = print) -> None:
        self._settings = settings
        self._notice = notice

    async def ask_question(self, request: Mapping[str, Any]) -> dict[str, Any]:
        async with local_tqa(self._notice, self._settings) as tqa:
            return await tqa.ask_question(request)
