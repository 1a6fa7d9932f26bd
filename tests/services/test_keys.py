"""KeyService on SQLite and PostgreSQL: keys shown once and stored as hashes, verification,
revocation, and a last-used time written at most once a minute."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import Engine, text

from dagwright.errors import InputError, NotFoundError
from dagwright.services.apps import AppService
from dagwright.services.keys import KeyService
from dagwright.store.db import session
from dagwright.store.models import ApiKey, App, utcnow
from support.database import clear
from support.flows import registry


@pytest.fixture
def keys(engine: Engine) -> Iterator[KeyService]:
    yield KeyService(engine)
    clear(engine)


@pytest.fixture
def app(engine: Engine, keys: KeyService) -> App:
    return AppService(engine, registry()).create_app("keyed", "Keyed")


def stored(engine: Engine, key_id: str) -> ApiKey:
    with session(engine) as db:
        found = db.get(ApiKey, key_id)
    assert found is not None
    return found


def test_a_key_is_returned_once_and_stored_as_a_hash(
    keys: KeyService, app: App, engine: Engine
) -> None:
    key, plaintext = keys.create(app.id, "ci")
    assert plaintext.startswith("dw_")
    assert len(plaintext) == 3 + 43  # token_urlsafe(32): 43 characters
    assert (key.app_id, key.name, key.prefix) == (app.id, "ci", plaintext[:10])
    assert key.hash == hashlib.sha256(plaintext.encode()).hexdigest()
    assert (key.last_used_at, key.revoked_at) == (None, None)
    row = stored(engine, key.id)
    assert row.hash == key.hash
    # Nowhere in the row is the key itself.
    with engine.connect() as connection:
        values = connection.execute(text("SELECT * FROM api_keys")).one()
    assert all(plaintext not in str(value) for value in values)


def test_every_key_is_different(keys: KeyService, app: App) -> None:
    plaintexts = {keys.create(app.id, f"k{i}")[1] for i in range(5)}
    assert len(plaintexts) == 5


def test_create_checks_the_app_and_the_name(keys: KeyService, app: App) -> None:
    with pytest.raises(NotFoundError) as info:
        keys.create("0" * 32, "ci")
    assert info.value.code == "app_not_found"
    with pytest.raises(InputError, match="name"):
        keys.create(app.id, " ")
    with pytest.raises(InputError, match="name"):
        keys.create(app.id, "n" * 101)
    assert keys.list(app.id) == []


def test_verify(keys: KeyService, app: App) -> None:
    key, plaintext = keys.create(app.id, "ci")
    found = keys.verify(plaintext)
    assert found is not None
    assert (found.id, found.app_id) == (key.id, app.id)
    assert keys.verify(plaintext + "x") is None
    assert keys.verify("dw_" + "a" * 43) is None
    assert keys.verify(plaintext[3:]) is None  # without the prefix
    assert keys.verify("") is None


def test_a_revoked_key_no_longer_verifies(keys: KeyService, app: App) -> None:
    key, plaintext = keys.create(app.id, "ci")
    revoked = keys.revoke(app.id, key.id)
    assert revoked.revoked_at is not None
    assert keys.verify(plaintext) is None
    # Revoking again keeps the first time.
    assert keys.revoke(app.id, key.id).revoked_at == revoked.revoked_at


def test_revoke_unknown_or_another_apps_key(keys: KeyService, app: App, engine: Engine) -> None:
    other = AppService(engine, registry()).create_app("other", "Other")
    key, plaintext = keys.create(other.id, "theirs")
    for app_id, key_id in ((app.id, key.id), (app.id, "0" * 32)):
        with pytest.raises(NotFoundError) as info:
            keys.revoke(app_id, key_id)
        assert info.value.code == "key_not_found"
    assert keys.verify(plaintext) is not None


def test_list_shows_revoked_keys_oldest_first(keys: KeyService, app: App) -> None:
    first, _ = keys.create(app.id, "first")
    second, _ = keys.create(app.id, "second")
    keys.revoke(app.id, first.id)
    listed = keys.list(app.id)
    assert [(k.name, k.revoked_at is not None) for k in listed] == [
        ("first", True),
        ("second", False),
    ]
    assert listed[1].id == second.id


def test_last_used_is_written_at_most_once_a_minute(
    keys: KeyService, app: App, engine: Engine
) -> None:
    key, plaintext = keys.create(app.id, "busy")
    verified = keys.verify(plaintext)
    assert verified is not None
    first_use = stored(engine, key.id).last_used_at
    assert first_use is not None
    assert verified.last_used_at == first_use
    assert abs(utcnow() - first_use) < timedelta(seconds=30)
    for _ in range(3):
        keys.verify(plaintext)
    assert stored(engine, key.id).last_used_at == first_use

    # A minute later, the next call writes again.
    earlier = first_use - timedelta(minutes=2)
    with session(engine) as db:
        row = db.get(ApiKey, key.id)
        assert row is not None
        row.last_used_at = earlier
        db.commit()
    keys.verify(plaintext)
    later = stored(engine, key.id).last_used_at
    assert later is not None
    assert later > first_use
