"""The endpoint cache hears what the app and key services announce: a change made through
them is answered at once, though the cache would keep its entries for an hour."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, update
from sqlmodel import col

from dagwright.errors import NotFoundError
from dagwright.services.apps import AppService
from dagwright.services.changes import Change
from dagwright.services.endpoints import EndpointResolver
from dagwright.services.keys import KeyService
from dagwright.store.db import session
from dagwright.store.models import App
from support.database import clear
from support.flows import edge, flow_doc, node, registry

HOUR = 3600.0


def constant(value: int) -> dict[str, object]:
    return flow_doc(
        [node("c", "t_const", value=value), node("out", "output", name="result")],
        [edge("c", "out")],
    )


@pytest.fixture
def apps(engine: Engine) -> Iterator[AppService]:
    yield AppService(engine, registry())
    clear(engine)


@pytest.fixture
def keys(engine: Engine) -> KeyService:
    return KeyService(engine)


@pytest.fixture
def resolver(apps: AppService, keys: KeyService) -> EndpointResolver:
    return EndpointResolver(apps, keys, ttl=HOUR)


async def test_a_change_behind_the_services_is_not_seen_within_the_ttl(
    engine: Engine, apps: AppService, resolver: EndpointResolver
) -> None:
    apps.create_app("cached", "Before")
    assert (await resolver.app("cached")).name == "Before"
    with session(engine) as db:
        db.exec(update(App).where(col(App.slug) == "cached").values(name="After"))
        db.commit()
    assert (await resolver.app("cached")).name == "Before"


async def test_publish_is_answered_at_once(apps: AppService, resolver: EndpointResolver) -> None:
    apps.create_app("pub", "Pub")
    first = apps.create_version("pub", constant(1))
    apps.publish("pub", first.id)
    assert (await resolver.endpoint("pub", None)).version_id == first.id
    second = apps.create_version("pub", constant(2))
    apps.publish("pub", second.id)
    assert (await resolver.endpoint("pub", None)).version_id == second.id


async def test_rename_and_delete_are_answered_at_once(
    apps: AppService, resolver: EndpointResolver
) -> None:
    apps.create_app("renamed", "Before")
    assert (await resolver.app("renamed")).name == "Before"
    apps.update_app("renamed", name="After")
    assert (await resolver.app("renamed")).name == "After"
    apps.delete_app("renamed")
    with pytest.raises(NotFoundError):
        await resolver.app("renamed")


async def test_a_revoked_key_is_refused_at_once(
    apps: AppService, keys: KeyService, resolver: EndpointResolver
) -> None:
    app = apps.create_app("keyed", "Keyed")
    key, plaintext = keys.create(app.id, "ci")
    assert (await resolver.key(plaintext)) is not None
    keys.revoke(app.id, key.id)
    assert (await resolver.key(plaintext)) is None


def test_every_change_is_announced_once_committed(
    engine: Engine, apps: AppService, keys: KeyService
) -> None:
    heard: list[tuple[str, str, bool | None]] = []

    def listen(change: Change) -> None:
        # Announced after the commit: a listener reading the database sees the change.
        stored = None
        if change.subject == "app":
            with session(engine) as db:
                stored = db.get(App, change.id) is not None
        heard.append((change.subject, change.action, stored))

    apps.changes.subscribe(listen)
    keys.changes.subscribe(listen)
    app = apps.create_app("told", "Told")
    version = apps.create_version("told", constant(1))
    apps.publish("told", version.id)
    apps.update_app("told", name="Renamed")
    key, _ = keys.create(app.id, "ci")
    keys.revoke(app.id, key.id)
    keys.revoke(app.id, key.id)  # already revoked: no change, nothing announced
    apps.delete_app("told")
    assert heard == [
        ("app", "created", True),
        ("version", "created", None),
        ("app", "published", True),
        ("app", "updated", True),
        ("key", "created", None),
        ("key", "revoked", None),
        ("app", "deleted", False),
    ]


class CountingApps(AppService):
    """The real app service, counting the reads the resolver makes of it."""

    reads = 0

    def get_app(self, ref: str) -> App:
        self.reads += 1
        return super().get_app(ref)


async def test_callers_missing_together_share_one_read_and_a_stale_entry_is_refreshed_once(
    engine: Engine, apps: AppService, keys: KeyService
) -> None:
    apps.create_app("herd", "Herd")
    counting = CountingApps(engine, registry())
    resolver = EndpointResolver(counting, keys, ttl=0.2)
    cold = await asyncio.gather(*(resolver.app("herd") for _ in range(50)))
    assert {app.name for app in cold} == {"Herd"}
    assert counting.reads == 1
    await asyncio.sleep(0.3)  # expired: answered from the old entry while one read refreshes
    stale = await asyncio.gather(*(resolver.app("herd") for _ in range(50)))
    assert {app.name for app in stale} == {"Herd"}
    await asyncio.sleep(0.1)
    assert counting.reads == 2


async def test_a_change_announced_from_a_route_thread_is_answered_once_the_route_returns(
    apps: AppService, resolver: EndpointResolver
) -> None:
    # Sync routes run in threads: the publish is announced there while the loop serves others.
    apps.create_app("threaded", "Threaded")
    first = apps.create_version("threaded", constant(1))
    apps.publish("threaded", first.id)
    assert (await resolver.endpoint("threaded", None)).version_id == first.id
    second = apps.create_version("threaded", constant(2))
    await asyncio.to_thread(apps.publish, "threaded", second.id)
    assert (await resolver.endpoint("threaded", None)).version_id == second.id
