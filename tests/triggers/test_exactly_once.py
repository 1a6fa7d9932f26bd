"""Several replicas on one database (SQLite, PostgreSQL): each cron tick starts exactly one
run, whichever replica's scheduler sees it first; every firing is a recorded run."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlmodel import Session

from dagwright.registry import Registry
from dagwright.runtime import Executor
from dagwright.secrets import EnvSecrets
from dagwright.services.apps import AppService
from dagwright.services.runs.service import RunService
from dagwright.services.triggers import TriggerService
from dagwright.store.trigger_models import Trigger, TriggerFiring
from support.database import DATABASES, migrated_engine
from support.server import EXAMPLES


@pytest.fixture(scope="module", params=DATABASES)
def engine(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Engine]:
    yield from migrated_engine(request.param, tmp_path_factory)


def _published(apps: AppService, slug: str) -> None:
    apps.create_app(slug, slug)
    flow = json.loads((EXAMPLES / "hello.json").read_text())
    version = apps.create_version(slug, flow)
    apps.publish(slug, version.id)


async def test_each_tick_fires_once_across_replicas(engine: Engine, tmp_path: Path) -> None:
    apps = AppService(engine, Registry.default())
    slug = f"cron-{tmp_path.name[-8:]}".lower().replace("_", "-")
    _published(apps, slug)
    replicas = [RunService(engine, Executor(), f"replica-{i}") for i in range(3)]
    services = [TriggerService(engine, apps, runs, EnvSecrets()) for runs in replicas]
    trigger = services[0].create(
        slug,
        {"kind": "cron", "name": "every minute", "cron": "* * * * *", "inputs": {"name": "Cron"}},
    )
    # Five minutes later (as if the ticks were just due), three replicas look at once.
    now = datetime.now(UTC).replace(second=30, microsecond=0) + timedelta(minutes=5)
    with Session(engine) as session:  # the last tick seen: five minutes ago
        row = session.get(Trigger, trigger.id)
        assert row is not None
        row.last_tick = now - timedelta(minutes=3, seconds=10)
        row.catch_up = "all"
        session.add(row)
        session.commit()
    try:
        passes = await asyncio.gather(*(s.tick_once(now) for s in services))
        fired = [firing for one in passes for firing in one]
        ticks = sorted(f.tick for f in fired)
        assert len(ticks) == 3  # 3 ticks in the window, each fired by one replica only
        assert len(set(ticks)) == 3
        # A later pass at the same moment fires nothing more.
        assert [await s.tick_once(now) for s in services] == [[], [], []]
        # Each firing is a run, recorded as any other, by the replica that claimed the tick.
        for runs in replicas:
            for live in runs.live_runs.values():
                await live.wait()
        for firing in fired:
            assert firing.run_id is not None
            record = replicas[0].get(firing.run_id)
            assert (record.mode, record.status) == ("cron", "succeeded")
            assert record.outputs == {"greeting": "Hello, Cron!"}
            assert record.replica == firing.replica
        with Session(engine) as session:
            query = select(TriggerFiring).where(TriggerFiring.trigger_id == trigger.id)  # type: ignore[arg-type]
            assert len(list(session.scalars(query))) == 3
    finally:
        for runs in replicas:
            await runs.close()
