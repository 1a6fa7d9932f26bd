"""The periodic sweep: a failing round is logged and the next one runs; close() ends it."""

from __future__ import annotations

import asyncio

import pytest

from dagwright.periodic import PeriodicSweep


async def test_a_failed_round_does_not_stop_the_sweep(caplog: pytest.LogCaptureFixture) -> None:
    rounds: list[int] = []
    third = asyncio.Event()

    async def work() -> None:
        rounds.append(len(rounds))
        if len(rounds) == 1:
            raise RuntimeError("the database went away a moment")
        if len(rounds) == 3:
            third.set()

    sweep = PeriodicSweep(work, 0.001, name="test-sweep", what="testing the sweep")
    sweep.start()
    sweep.start()  # a second start adds no second task
    await asyncio.wait_for(third.wait(), 30)
    await sweep.close()
    ended_at = len(rounds)
    await asyncio.sleep(0.01)
    assert len(rounds) == ended_at  # closed: no round after it
    assert "testing the sweep failed" in caplog.text
    assert not [t for t in asyncio.all_tasks() if t.get_name() == "test-sweep"]
