"""The composition root closes what it built: every service, even when one fails to close."""

from __future__ import annotations

from pathlib import Path

import pytest

from dagwright.composition import Composition
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
    process = Composition(Settings(data_dir=tmp_path), kind="cli")
    plain = process.apps()  # built with the base palette
    extended = process.registry().extended([])
    # The server's palette would be silently ignored: the first shape would win.
    with pytest.raises(RuntimeError, match="apps service was already built"):
        process.apps(extended)
    assert process.apps() is plain  # asking for no shape in particular takes what is built
