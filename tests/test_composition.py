"""The composition root closes what it built: every service, even when one fails to close."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagwright.composition import Composition
from dagwright.registry import HUMAN
from dagwright.services.human import HumanInbox
from dagwright.settings import Settings


async def test_a_service_failing_to_close_does_not_keep_the_others_open(tmp_path: Path) -> None:
    process = Composition(Settings(data_dir=tmp_path), kind="cli")
    closed: list[str] = []

    async def first() -> None:
        closed.append("first")

    async def failing() -> None:
        closed.append("failing")
        raise OSError("the database went away")

    # What services register as they are built (the last built closes first), and the
    # synchronous ones the process closes at the very end.
    process._async_closers += [first, failing]
    process._stack.callback(closed.append, "synchronous")
    with pytest.raises(OSError, match="the database went away"):
        await process.aclose()
    assert closed == ["failing", "first", "synchronous"]


def test_a_service_asked_for_in_another_shape_after_it_was_built_is_a_wiring_error(
    tmp_path: Path,
) -> None:
    process = Composition(Settings(data_dir=tmp_path), kind="standalone")
    plain = process.executor()  # built with no node timeout
    # A timeout asked for later would be silently ignored: the first shape would win.
    with pytest.raises(RuntimeError, match="executor service was already built"):
        process.executor(node_timeout=5.0)
    assert process.executor() is plain  # asking for no shape in particular takes what is built


async def test_a_process_with_a_database_of_runs_has_the_palette_and_the_human_inbox(
    tmp_path: Path,
) -> None:
    # The server, a worker and the commands on the database build apps over the palette
    # (the registry and Data-Copilot's interfaces) and let human_input nodes wait.
    server = Composition(Settings(data_dir=tmp_path / "server"))
    try:
        assert server.palette() is not server.registry()
        assert server.apps()._registry is server.palette()
        inbox = server.block_services().get(HUMAN)
        assert isinstance(inbox, HumanInbox)
        assert inbox.engine is server.database()
    finally:
        await server.aclose()
    # `dagwright run` of a file: the registry alone, and no runs to wait in.
    standalone = Composition(Settings(data_dir=tmp_path / "standalone"), kind="standalone")
    try:
        assert standalone.palette() is standalone.registry()
        assert not standalone.block_services().provides(HUMAN)
    finally:
        await standalone.aclose()
