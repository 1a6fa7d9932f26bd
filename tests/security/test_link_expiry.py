"""Answers after expiry (issue 29, item 10): a human request's signed link was accepted until
the once-a-second sweep settled the request, up to 0.64 s after its expiry instant. A link
is valid strictly before that instant, judged by the service's one clock at full precision,
and the claim itself checks it (an answer racing the instant cannot slip in). The clock is
the service's seam: the tests stand at the instant, no sleeps. SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio
from sqlalchemy import Engine

from dagwright.errors import ConflictError
from dagwright.registry import HUMAN, BlockServices, Registry
from dagwright.runtime import Executor, ExecutorOptions
from dagwright.services.apps import AppService
from dagwright.services.human import HumanInbox, HumanService
from dagwright.services.runs.service import RunService
from dagwright.store.db import session
from dagwright.store.human import HumanRequestRepository
from dagwright.store.human_models import HumanRequest
from support.database import DATABASES, migrated_engine
from support.server import edge, flow, node


@pytest.fixture(scope="module", params=DATABASES)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)


class Clock:
    """The instant the service sees: set by the test."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now


class Setup:
    def __init__(self, engine: Engine) -> None:
        self.registry = Registry.default()
        self.apps = AppService(engine, self.registry)
        services = BlockServices({HUMAN: HumanInbox(engine)})
        self.runs = RunService(engine, Executor(ExecutorOptions(services=services)), "test-expiry")
        self.clock = Clock()
        self.human = HumanService(engine, self.apps, self.runs, clock=self.clock)
        self.engine = engine

    async def waiting_request(self, slug: str) -> HumanRequest:
        """A published app's run paused on a request that expires in an hour."""
        document = flow(
            [
                node("draft", "text_input", name="draft"),
                node("approve", "human_input", message="{{ t }}", inputs=["t"], timeout_s=3600),
                node("ok", "template", template="ok {{ a.choice }}"),
                node("verdict", "output", name="verdict"),
            ],
            [
                edge("draft", "approve.t"),
                {**edge("approve", "ok.a"), "branch": "answered"},
                edge("ok", "verdict"),
            ],
        )
        app = await asyncio.to_thread(self.apps.create_app, slug, slug)
        version = await asyncio.to_thread(self.apps.create_version, slug, document)
        plan = await asyncio.to_thread(self.apps.compiled, version)
        live = await self.runs.start(plan, {"draft": "x"}, app_id=app.id, version_id=version.id)
        for _ in range(600):
            record = await asyncio.to_thread(self.runs.get, live.run_id)
            if record.status != "running":
                break
            await asyncio.sleep(0.05)
        assert record.status == "waiting", record
        [request] = self.human.requests(run_id=live.run_id).items
        assert request.expires_at is not None
        return request


@pytest_asyncio.fixture
async def s(engine: Engine) -> AsyncIterator[Setup]:
    setup = Setup(engine)
    setup.runs.start_writer()
    try:
        yield setup
    finally:
        await setup.runs.close()


def _instant(request: HumanRequest) -> datetime:
    """The expiry instant as the database gave it back (UTC)."""
    assert request.expires_at is not None
    at = request.expires_at
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


async def test_a_link_answered_at_its_expiry_instant_is_refused_and_nothing_is_written(
    s: Setup,
) -> None:
    request = await s.waiting_request("expiring")
    found = s.human.by_link(request.link_token)
    s.clock.now = _instant(found)  # the instant itself: no longer valid
    with pytest.raises(ConflictError, match="expired") as refused:
        await s.human.answer(found.id, {}, "answered")
    assert refused.value.code == "human_expired"
    s.clock.now = _instant(found) + timedelta(milliseconds=640)  # the old window's far end
    with pytest.raises(ConflictError, match="expired"):
        await s.human.answer(found.id, {}, "answered")
    after = s.human.get(found.id)
    assert (after.status, after.answer) == ("waiting", None)  # the sweep's to settle
    due = await asyncio.to_thread(_due, s.engine, _instant(found))
    assert found.id in [r.id for r in due]


async def test_a_link_answered_a_microsecond_before_its_expiry_is_accepted(s: Setup) -> None:
    request = await s.waiting_request("in-time")
    s.clock.now = _instant(request) - timedelta(microseconds=1)
    done = await s.human.answer(request.id, {}, "answered")
    assert done.run_id is not None
    assert s.human.get(request.id).status == "answered"
    due = await asyncio.to_thread(_due, s.engine, _instant(request))
    assert request.id not in [r.id for r in due]


def _due(engine: Engine, now: datetime) -> list[HumanRequest]:
    with session(engine) as db:
        return HumanRequestRepository(db).due(now)


async def test_the_claim_itself_refuses_an_answer_at_the_instant(s: Setup) -> None:
    """The service checks first; the conditional update is what holds when an answer and
    the instant race (the row read before the instant, the claim made at it)."""
    request = await s.waiting_request("racing")
    at = _instant(request)

    def claim(open_at: datetime) -> bool:
        with session(s.engine) as db:
            done = HumanRequestRepository(db).claim(
                request.id, "answered", {}, "answered", open_at=open_at
            )
            db.commit()
            return done

    assert await asyncio.to_thread(claim, at) is False
    assert await asyncio.to_thread(claim, at - timedelta(microseconds=1)) is True
