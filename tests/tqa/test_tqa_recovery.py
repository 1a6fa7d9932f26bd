"""The sweep that takes up the background conversations of dead server processes
(tqa/recovery.py), on a real SQLite database with real replica leases: only running
conversations whose lease is missing or stale are taken, each by one process, with one more
attempt; one past MAX_ATTEMPTS ends failed (`server_lost`), and so does a foreground one at
once (its caller died with its process), which frees its place under the conversation limit;
waiting, leaseless (the command line's) and live processes' conversations are left alone; in
queue mode its job is queued instead.
The end-to-end case, with killed `dagwright serve` processes, is
test_tqa_recovery_processes.py."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, text
from test_tqa_orchestrator import TOOLS, Known, Scripted

from dagwright.store.db import make_engine, migrate
from dagwright.store.models import new_id, utcnow
from dagwright.tqa.admission import ConversationAdmission, ConversationsFullError
from dagwright.tqa.conversation import AskRequest, Turn
from dagwright.tqa.orchestrator import Orchestrator
from dagwright.tqa.recording import ConversationStore
from dagwright.tqa.recovery import (
    FOREGROUND_LOST,
    MAX_ATTEMPTS,
    SERVER_LOST,
    ConversationRecovery,
)

STALE_AFTER = 10.0


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    made = make_engine(f"sqlite:///{tmp_path / 'db.sqlite'}")
    migrate(made)
    yield made
    made.dispose()


def lease(engine: Engine, age: float) -> str:
    """A replica lease last refreshed `age` seconds ago."""
    lease_id, at = new_id(), utcnow() - timedelta(seconds=age)
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO replicas (id, name, pid, host, started_at, heartbeat_at) "
                "VALUES (:id, 'r', 1, 'h', :at, :at)"
            ),
            {"id": lease_id, "at": at},
        )
    return lease_id


async def begun(store: ConversationStore, replica: str | None, foreground: bool = False) -> str:
    """A conversation recorded running under lease `replica`, with the User's turn."""
    orchestrator = Orchestrator(Scripted(), tools=lambda: TOOLS, knowledge=Known(), store=store)
    conversation = await orchestrator.begin(
        AskRequest(question="q"), replica=replica, foreground=foreground
    )
    await asyncio.to_thread(store.add_turn, conversation, Turn(0, "User", "q"))
    return conversation.id


def row(engine: Engine, conversation_id: str) -> dict[str, Any]:
    with engine.connect() as conn:
        found = conn.execute(
            text("SELECT status, replica, attempts FROM tqa_conversations WHERE id = :id"),
            {"id": conversation_id},
        ).one()
    return dict(found._mapping)


class Resumed:
    def __init__(self) -> None:
        self.ids: list[str] = []

    async def __call__(self, conversation_id: str) -> None:
        self.ids.append(conversation_id)


def recovery(store: ConversationStore, lease_id: str, resumed: Resumed) -> ConversationRecovery:
    return ConversationRecovery(store, lambda: lease_id, STALE_AFTER, resumed)


async def test_only_running_conversations_of_dead_processes_are_taken_up(engine: Engine) -> None:
    store = ConversationStore(engine)
    mine, live, stale = lease(engine, 0), lease(engine, 1), lease(engine, 60)
    missing = new_id()  # a lease deleted: its process stopped (or was found gone)
    of_stale = await begun(store, stale)
    of_missing = await begun(store, missing)
    of_live = await begun(store, live)
    of_mine = await begun(store, mine)
    foreground = await begun(store, None)  # or a queue worker's: no replica
    waiting = await begun(store, missing)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE tqa_conversations SET status = 'waiting' WHERE id = :id"),
            {"id": waiting},
        )
    assert row(engine, of_stale)["attempts"] == 1  # its first process
    resumed = Resumed()
    taken = await recovery(store, mine, resumed).recover()
    assert sorted(taken) == sorted([of_stale, of_missing])
    assert resumed.ids == taken
    for conversation_id in taken:
        assert row(engine, conversation_id) == {
            "status": "running",
            "replica": mine,
            "attempts": 2,
        }
    assert row(engine, of_live)["replica"] == live
    assert row(engine, of_mine)["attempts"] == 1
    assert row(engine, foreground)["replica"] is None
    assert row(engine, waiting) == {
        "status": "waiting",
        "replica": missing,
        "attempts": 1,
    }
    # Another live process finds nothing more: each was taken by one.
    assert await recovery(store, live, Resumed()).recover() == []


async def test_two_processes_recovering_at_once_take_each_conversation_once(
    engine: Engine,
) -> None:
    store = ConversationStore(engine)
    first, second, dead = lease(engine, 0), lease(engine, 0), new_id()
    ids = [await begun(store, dead) for _ in range(4)]
    one, other = Resumed(), Resumed()
    await asyncio.gather(
        recovery(store, first, one).recover(), recovery(store, second, other).recover()
    )
    assert sorted(one.ids + other.ids) == sorted(ids)
    assert all(row(engine, i)["attempts"] == 2 for i in ids)


async def test_a_conversation_whose_processes_kept_dying_ends_failed(engine: Engine) -> None:
    store = ConversationStore(engine)
    mine, dead = lease(engine, 0), new_id()
    conversation_id = await begun(store, dead)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE tqa_conversations SET attempts = :n WHERE id = :id"),
            {"n": MAX_ATTEMPTS, "id": conversation_id},
        )
    resumed = Resumed()
    assert await recovery(store, mine, resumed).recover() == []
    assert resumed.ids == []
    found = store.get(conversation_id)
    assert found["status"] == "failed"
    assert found["error"] == {
        "code": SERVER_LOST,
        "message": f"the server process running it stopped {MAX_ATTEMPTS} times",
    }
    assert found["finished_at"] is not None


async def test_in_queue_mode_its_job_is_queued_instead(engine: Engine) -> None:
    store = ConversationStore(engine)
    mine, dead = lease(engine, 0), new_id()
    conversation_id = await begun(store, dead)
    queued: list[str] = []

    def job(conversation: str) -> Any:
        def defer(conn: Connection) -> None:
            assert conn.in_transaction()
            queued.append(conversation)

        return defer

    resumed = Resumed()
    sweep = ConversationRecovery(store, lambda: mine, STALE_AFTER, resumed, job)
    assert await sweep.recover() == [conversation_id]
    assert queued == [conversation_id]
    assert resumed.ids == []  # a worker runs it
    assert row(engine, conversation_id)["replica"] is None


async def test_an_approved_conversation_goes_on_under_the_lease_of_its_process(
    engine: Engine,
) -> None:
    store = ConversationStore(engine)
    dead, mine = new_id(), lease(engine, 0)
    conversation_id = await begun(store, dead)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE tqa_conversations SET status = 'waiting', attempts = 4 WHERE id = :id"),
            {"id": conversation_id},
        )
    assert await asyncio.to_thread(store.claim, conversation_id, "waiting", None, mine)
    # Its count starts again, as a queue job's does after an approval.
    assert row(engine, conversation_id) == {
        "status": "running",
        "replica": mine,
        "attempts": 1,
    }


async def test_a_clean_stop_hands_its_conversations_over_without_an_attempt(
    engine: Engine,
) -> None:
    store = ConversationStore(engine)
    stopping, other = lease(engine, 0), lease(engine, 0)
    handed = await begun(store, stopping)
    not_mine = await begun(store, other)
    waiting = await begun(store, stopping)
    with engine.begin() as conn:
        conn.execute(
            text("UPDATE tqa_conversations SET status = 'waiting' WHERE id = :id"),
            {"id": waiting},
        )
    assert await asyncio.to_thread(store.hand_over, stopping) == 1
    assert row(engine, handed) == {"status": "running", "replica": stopping, "attempts": 0}
    assert row(engine, not_mine)["attempts"] == 1
    assert row(engine, waiting)["attempts"] == 1
    # Its lease released, the process that takes it up counts one: no death so far.
    with engine.begin() as conn:
        conn.execute(text("DELETE FROM replicas WHERE id = :id"), {"id": stopping})
    assert await recovery(store, other, Resumed()).recover() == [handed]
    assert row(engine, handed)["attempts"] == 1


async def test_a_foreground_conversation_of_a_dead_process_ends_and_frees_its_place(
    engine: Engine,
) -> None:
    """Its caller's request died with the process: ended `server_lost` (turns kept), not
    resumed; before, it held a place under the conversation limit for good."""
    store = ConversationStore(engine)
    mine, live, stale = lease(engine, 0), lease(engine, 1), lease(engine, 60)
    lost = await begun(store, stale, foreground=True)
    answering = await begun(store, live, foreground=True)
    of_command_line = await begun(store, None, foreground=True)
    background = await begun(store, stale)
    admission = ConversationAdmission(store, limit=4)
    with pytest.raises(ConversationsFullError):
        await admission.check()
    resumed = Resumed()
    assert await recovery(store, mine, resumed).recover() == [background]
    assert resumed.ids == [background]
    found = store.get(lost)
    assert found["status"] == "failed"
    assert found["error"] == {"code": SERVER_LOST, "message": FOREGROUND_LOST}
    assert found["finished_at"] is not None
    assert [t["agent"] for t in found["turns"]] == ["User"]  # kept
    assert row(engine, lost)["replica"] == stale  # not taken up
    assert row(engine, answering) == {"status": "running", "replica": live, "attempts": 1}
    assert row(engine, of_command_line)["status"] == "running"
    assert row(engine, background) == {"status": "running", "replica": mine, "attempts": 2}
    await admission.check()  # its place is free
    # Another live process finds nothing more to end.
    assert await recovery(store, live, Resumed()).recover() == []


async def test_a_clean_stop_ends_its_foreground_conversations_and_hands_over_the_rest(
    engine: Engine,
) -> None:
    store = ConversationStore(engine)
    stopping, other = lease(engine, 0), lease(engine, 0)
    foreground = await begun(store, stopping, foreground=True)
    background = await begun(store, stopping)
    not_mine = await begun(store, other, foreground=True)
    assert await asyncio.to_thread(store.hand_over, stopping) == 1  # the background one
    assert await asyncio.to_thread(store.end_foreground, stopping, "cancelled", "stopped") == 1
    assert store.get(foreground)["error"] == {"code": "cancelled", "message": "stopped"}
    assert row(engine, foreground)["status"] == "failed"
    assert row(engine, background) == {"status": "running", "replica": stopping, "attempts": 0}
    assert row(engine, not_mine)["status"] == "running"
