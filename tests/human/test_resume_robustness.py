"""Pauses that go wrong, through the real services on SQLite and PostgreSQL (apps, runs, the
executor and the human inbox as the server wires them): a continuation that cannot start
leaves the run and its request waiting to be answered again, the sweep takes over a claim
that started nothing, one bad request does not stop a sweep, a node asks once per run, and
a node's path longer than the old 200 characters is stored."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from sqlalchemy import Engine, func, select, text, update

from dagwright.errors import ConflictError, InputError
from dagwright.registry import HUMAN, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions
from dagwright.runtime.plan import CompiledFlow
from dagwright.services.apps import AppService
from dagwright.services.editor import compile_unsaved
from dagwright.services.human import SWEEP_GRACE, HumanInbox, HumanService
from dagwright.services.runs.records import RunRecord
from dagwright.services.runs.service import RunService
from dagwright.store.db import migrate
from dagwright.store.human_models import HumanRequest
from dagwright.store.models import Run, utcnow
from support.database import DATABASES, fresh_engine, migrated_engine
from support.server import edge, flow, node

REQUESTS = HumanRequest.__table__  # type: ignore[attr-defined]
RUNS = Run.__table__  # type: ignore[attr-defined]


@pytest.fixture(scope="module", params=DATABASES)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)


class Services:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.registry = Registry.default()
        self.apps = AppService(engine, self.registry)
        self.inbox = HumanInbox(engine)
        services = BlockServices({HUMAN: self.inbox})
        self.runs = RunService(engine, Executor(ExecutorOptions(services=services)), "test-human")
        self.human = HumanService(engine, self.apps, self.runs)

    def compile(self, document: dict[str, Any]) -> CompiledFlow:
        return compile_unsaved(document, self.registry, self.apps)

    async def finished(self, run_id: str) -> RunRecord:
        """The run once it is no longer running (waiting counts as settled)."""
        for _ in range(600):
            record = await asyncio.to_thread(self.runs.get, run_id)
            if record.status != "running":
                return record
            await asyncio.sleep(0.05)
        raise AssertionError(f"run {run_id} is still running")

    def requests(self, run_id: str) -> list[HumanRequest]:
        return list(self.human.requests(status=None, run_id=run_id).items)


@pytest_asyncio.fixture
async def s(engine: Engine) -> AsyncIterator[Services]:
    services = Services(engine)
    services.runs.start_writer()
    try:
        yield services
    finally:
        await services.runs.close()


def review(prep: bool = True) -> dict[str, Any]:
    """draft -> prep -> approve (a person) -> ok -> verdict; without `prep`, draft feeds
    approve directly (the canvas after the node was deleted)."""
    nodes = [
        node("draft", "text_input", name="draft"),
        node("prep", "template", template="Draft: {{ d }}"),
        node("approve", "human_input", message="Approve? {{ text }}", inputs=["text"]),
        node("ok", "template", template="ok {{ a.choice }}"),
        node("verdict", "output", name="verdict"),
    ]
    edges = [
        edge("draft", "prep.d"),
        edge("prep", "approve.text"),
        {**edge("approve", "ok.a"), "branch": "answered"},
        edge("ok", "verdict"),
    ]
    if not prep:
        nodes.pop(1)
        edges[:2] = [edge("draft", "approve.text")]
    return flow(nodes, edges)


async def paused_debug_run(s: Services, document: dict[str, Any]) -> RunRecord:
    live = await s.runs.start(s.compile(document), {"draft": "x"}, app_id=None, version_id=None)
    paused = await s.finished(live.run_id)
    assert paused.status == "waiting", paused
    return paused


async def paused_app_run(s: Services, slug: str, document: dict[str, Any]) -> RunRecord:
    app = await asyncio.to_thread(s.apps.create_app, slug, slug)
    version = await asyncio.to_thread(s.apps.create_version, slug, document)
    plan = await asyncio.to_thread(s.apps.compiled, version)
    live = await s.runs.start(plan, {"draft": "x"}, app_id=app.id, version_id=version.id)
    paused = await s.finished(live.run_id)
    assert paused.status == "waiting", paused
    return paused


async def test_a_continuation_that_cannot_start_waits_to_be_answered_again(s: Services) -> None:
    paused = await paused_debug_run(s, review())
    [request] = s.requests(paused.id)

    # The canvas lost `prep`, which the run had passed: the answer says so, and nothing is lost.
    with pytest.raises(InputError, match="'prep'"):
        await s.human.answer(request.id, {}, draft=s.compile(review(prep=False)))
    assert (await asyncio.to_thread(s.runs.get, paused.id)).status == "waiting"
    [again] = s.requests(paused.id)
    assert (again.status, again.answer, again.resumed_run_id) == ("waiting", None, None)

    done = await s.human.answer(request.id, {}, draft=s.compile(review()))
    assert done.run_id is not None
    resumed = await s.finished(done.run_id)
    assert (resumed.status, resumed.outputs) == ("succeeded", {"verdict": "ok answered"})
    assert (await asyncio.to_thread(s.runs.get, paused.id)).status == "resumed"


async def test_the_sweep_takes_over_a_claim_that_started_nothing(s: Services) -> None:
    paused = await paused_app_run(s, "claimed", review())
    [request] = s.requests(paused.id)
    # What a replica that claimed the run and stopped left: the request answered, the run
    # `resumed`, no continuation.
    now = utcnow()
    with s.engine.begin() as connection:
        connection.execute(
            update(REQUESTS)
            .where(REQUESTS.c.id == request.id)
            .values(
                status="answered",
                answer={},
                choice="answered",
                answered_at=now - 2 * SWEEP_GRACE,
                resume_claimed_at=now,
            )
        )
        connection.execute(update(RUNS).where(RUNS.c.id == paused.id).values(status="resumed"))
    assert await s.human.resume_settled() == []  # a claim of a moment ago is being acted on

    with s.engine.begin() as connection:
        stale = now - SWEEP_GRACE - timedelta(seconds=1)
        connection.execute(
            update(REQUESTS).where(REQUESTS.c.id == request.id).values(resume_claimed_at=stale)
        )
    [taken] = await s.human.resume_settled()
    assert taken.waiting_run_id == paused.id
    assert taken.run_id is not None
    resumed = await s.finished(taken.run_id)
    assert (resumed.status, resumed.outputs) == ("succeeded", {"verdict": "ok answered"})
    assert resumed.parent_run_id == paused.id
    assert s.requests(paused.id)[0].resumed_run_id == taken.run_id
    assert await s.human.resume_settled() == []  # once


async def test_one_bad_due_request_does_not_stop_the_sweep(s: Services) -> None:
    past = utcnow() - timedelta(seconds=5)
    bad = HumanRequest(
        run_id="no-such-run-1",
        node="ask",
        message="?",
        form={"fields": [{"type": "text"}]},  # no name: the defaults cannot be filled
        link_token="bad-token",
        expires_at=past,
    )
    good = HumanRequest(
        run_id="no-such-run-2",
        node="ask",
        message="?",
        form={"fields": [{"name": "n", "type": "integer", "default": 3}]},
        link_token="good-token",
        expires_at=past,
    )
    with s.engine.begin() as connection:
        for request in (bad, good):
            connection.execute(REQUESTS.insert().values(**request.model_dump()))
    settled = await s.human.expire_due()
    assert [a.waiting_run_id for a in settled] == ["no-such-run-2"]
    assert s.human.get(good.id).status == "expired"
    assert s.human.get(good.id).answer == {"n": 3}
    assert s.human.get(bad.id).status == "waiting"


async def test_a_node_asks_once_per_run_under_a_long_path(s: Services) -> None:
    # 16 levels of nested maps with long node ids: far past the old VARCHAR(200).
    path = "/".join(f"review_every_single_item_{level:02d}[{level * 997}]" for level in range(16))
    path += "/approve"
    assert len(path) > 500
    form: dict[str, Any] = {"fields": [], "choices": []}
    first = await asyncio.to_thread(s.inbox.ask, "run-long", path, "first?", form, None)
    # The node runs again (a durable run resumed after its worker died): the same request.
    second = await asyncio.to_thread(s.inbox.ask, "run-long", path, "second?", form, 60.0)
    assert second.id == first.id
    assert (second.node, second.message) == (path, "first?")
    with s.engine.connect() as connection:
        count = select(func.count()).where(REQUESTS.c.run_id == "run-long")
        assert connection.execute(count).scalar_one() == 1
    assert s.human.get(first.id).node == path


async def test_an_output_stored_truncated_is_computed_again_on_resume(s: Services) -> None:
    """`big` (about 300 KB) is stored as a preview: the continuation runs it again rather than
    pass the preview on, and `size` gets the real text."""
    document = flow(
        [
            node("draft", "text_input", name="draft"),
            node("big", "template", template="{{ d * 300000 }}"),
            node("approve", "human_input", message="{{ t[:20] }}?", inputs=["t"]),
            node("size", "template", template="{{ b | length }} {{ a.choice }}"),
            node("out", "output", name="size"),
        ],
        [
            edge("draft", "big.d"),
            edge("big", "approve.t"),
            {**edge("approve", "size.a"), "branch": "answered"},
            edge("big", "size.b"),
            edge("size", "out"),
        ],
    )
    paused = await paused_debug_run(s, document)
    stored = {n.node: n for n in paused.nodes}
    assert stored["big"].output["truncated"] is True  # what the store kept
    [request] = s.requests(paused.id)
    done = await s.human.answer(request.id, {}, draft=s.compile(document))
    assert done.run_id is not None
    resumed = await s.finished(done.run_id)
    assert resumed.status == "succeeded", resumed.error
    assert resumed.outputs == {"size": "300000 answered"}  # "x" * 300000
    statuses = {n.node: n.status for n in resumed.nodes}
    assert (statuses["draft"], statuses["big"], statuses["approve"]) == (
        "reused",
        "succeeded",
        "reused",
    )


async def test_cancelling_a_paused_run_ends_it_and_closes_its_requests(s: Services) -> None:
    paused = await paused_app_run(s, "cancelled", review())
    [request] = s.requests(paused.id)
    cancelled = await s.runs.cancel(paused.id)
    assert cancelled.status == "cancelled"
    assert cancelled.error is not None
    assert cancelled.error["code"] == "cancelled"
    with pytest.raises(ConflictError, match=f"run {paused.id} was cancelled") as refused:
        await s.human.answer(request.id, {})  # before the sweep closed the request
    assert refused.value.code == "run_cancelled"

    assert await s.human.close_cancelled() == 1  # what every replica's sweep does
    assert s.human.get(request.id).status == "cancelled"
    assert s.requests(paused.id)[0].answer is None
    with pytest.raises(ConflictError, match=f"run {paused.id} was cancelled") as refused:
        await s.human.answer(request.id, {})
    assert refused.value.code == "run_cancelled"
    with pytest.raises(ConflictError) as again:
        await s.runs.cancel(paused.id)
    assert again.value.code == "run_finished"


async def test_cancelling_a_resumed_run_names_the_run_that_goes_on(s: Services) -> None:
    paused = await paused_app_run(s, "resumed", review())
    [request] = s.requests(paused.id)
    done = await s.human.answer(request.id, {})
    assert done.run_id is not None
    with pytest.raises(ConflictError, match=f"goes on as run {done.run_id}") as refused:
        await s.runs.cancel(paused.id)
    assert refused.value.code == "run_resumed"
    assert (await s.finished(done.run_id)).status == "succeeded"


@pytest.mark.parametrize("kind", DATABASES)
def test_the_migration_folds_requests_asked_twice_into_one(kind: str, tmp_path: Path) -> None:
    """Before 0016 a node run again asked again: the answered request (else the oldest) stays."""
    rows = [
        ("a1", "r1", "waiting"),
        ("a2", "r1", "answered"),  # r1's answered one wins over the older waiting one
        ("a3", "r1", "waiting"),
        ("b1", "r2", "waiting"),  # r2: both waiting, the smaller id stays
        ("b2", "r2", "waiting"),
        ("c1", "r3", "expired"),
    ]
    with fresh_engine(kind, tmp_path) as engine:
        migrate(engine, "0015")
        with engine.begin() as connection:
            for request_id, run_id, status in rows:
                connection.execute(
                    text(
                        "INSERT INTO human_requests (id, run_id, node, message, form, status, "
                        "link_token, created_at) VALUES (:id, :run, 'ask', '?', '{}', :status, "
                        ":token, CURRENT_TIMESTAMP)"
                    ),
                    {"id": request_id, "run": run_id, "status": status, "token": request_id},
                )
        migrate(engine)
        with engine.connect() as connection:
            kept = connection.execute(text("SELECT id FROM human_requests ORDER BY id")).all()
        assert [row[0] for row in kept] == ["a2", "b1", "c1"]


async def test_the_sweep_fails_a_run_that_can_never_go_on(s: Services) -> None:
    """A saved version's run whose recorded inputs no longer fit: the sweep does not try
    every SWEEP_GRACE for ever, the run fails saying why."""
    paused = await paused_app_run(s, "unfit", review())
    [request] = s.requests(paused.id)
    with s.engine.begin() as connection:
        connection.execute(
            update(REQUESTS)
            .where(REQUESTS.c.id == request.id)
            .values(
                status="answered",
                answer={},
                choice="answered",
                answered_at=utcnow() - 2 * SWEEP_GRACE,
            )
        )
        connection.execute(update(RUNS).where(RUNS.c.id == paused.id).values(inputs={"nope": "x"}))
    assert await s.human.resume_settled() == []  # logged, and the others would go on
    failed = await asyncio.to_thread(s.runs.get, paused.id)
    assert failed.status == "failed"
    assert failed.error is not None
    assert failed.error["code"] == "resume_failed"
    assert failed.error["node"] == "approve"
    assert "'nope'" in failed.error["message"]
    assert await s.human.resume_settled() == []


async def test_a_run_that_paused_after_a_cancel_was_asked_is_cancelled(s: Services) -> None:
    """The cancel was recorded while the run ran on another replica, which no longer saw it
    once the run paused: the sweep ends it."""
    paused = await paused_app_run(s, "asked-to-stop", review())
    [request] = s.requests(paused.id)
    with s.engine.begin() as connection:
        connection.execute(
            update(RUNS).where(RUNS.c.id == paused.id).values(cancel_requested_at=utcnow())
        )
    assert await s.human.close_cancelled() == 1
    cancelled = await asyncio.to_thread(s.runs.get, paused.id)
    assert cancelled.status == "cancelled"
    assert s.human.get(request.id).status == "cancelled"
