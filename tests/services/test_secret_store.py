"""DatabaseSecrets on SQLite and PostgreSQL (values encrypted at rest), and the master key
from the environment or a key file."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import Engine, text

from dagwright.errors import InputError
from dagwright.registry.services import Secrets
from dagwright.secrets import SecretNotFoundError
from dagwright.services.secret_store import (
    DatabaseSecrets,
    MasterKeyError,
    SecretDecryptError,
    master_key_from,
)
from dagwright.settings import load_settings
from support.database import clear

KEY = Fernet.generate_key()


@pytest.fixture
def store(engine: Engine) -> Iterator[DatabaseSecrets]:
    yield DatabaseSecrets(engine, KEY)
    clear(engine)


def ciphertexts(engine: Engine) -> dict[str, str]:
    with engine.connect() as connection:
        rows = connection.execute(text("SELECT name, ciphertext FROM secrets")).all()
    return {name: ciphertext for name, ciphertext in rows}


def test_set_and_get(store: DatabaseSecrets) -> None:
    store.set("github_token", "ghp_secret_value")
    store.set("db.password", "pä55wörd")  # not ASCII
    assert store.get("github_token") == "ghp_secret_value"
    assert store.get("db.password") == "pä55wörd"
    assert isinstance(store, Secrets)


def test_values_are_encrypted_at_rest(store: DatabaseSecrets, engine: Engine) -> None:
    store.set("api_key", "sk-plain-value-123")
    stored = ciphertexts(engine)["api_key"]
    assert "sk-plain-value-123" not in stored
    assert Fernet(KEY).decrypt(stored.encode()) == b"sk-plain-value-123"


def test_set_replaces_a_value(store: DatabaseSecrets, engine: Engine) -> None:
    store.set("token", "first")
    before = ciphertexts(engine)["token"]
    store.set("token", "second")
    assert store.get("token") == "second"
    assert ciphertexts(engine)["token"] != before
    assert store.names() == ["token"]


def test_names_are_sorted_and_never_values(store: DatabaseSecrets) -> None:
    for name, value in (("zeta", "value-z"), ("alpha", "value-a"), ("Mid_1", "value-m")):
        store.set(name, value)
    assert store.names() == ["Mid_1", "alpha", "zeta"]


def test_missing_and_deleted_secrets(store: DatabaseSecrets) -> None:
    with pytest.raises(SecretNotFoundError, match="'nope' is not set") as info:
        store.get("nope")
    assert (info.value.code, info.value.name) == ("secret_not_found", "nope")
    store.set("short_lived", "value")
    store.delete("short_lived")
    assert store.names() == []
    with pytest.raises(SecretNotFoundError):
        store.get("short_lived")
    with pytest.raises(SecretNotFoundError):
        store.delete("short_lived")


def test_invalid_names_and_values(store: DatabaseSecrets) -> None:
    for call in (lambda: store.get("bad name"), lambda: store.set("1abc", "v")):
        # Both a ValueError (as Secrets.get promises) and an InputError (for the API).
        with pytest.raises(ValueError, match="not a valid secret name") as info:
            call()
        assert isinstance(info.value, InputError)
    with pytest.raises(InputError, match="non-empty"):
        store.set("empty", "")
    assert store.names() == []


def test_another_master_key_cannot_read_the_values(store: DatabaseSecrets, engine: Engine) -> None:
    store.set("x", "written-with-the-first-key")
    other = DatabaseSecrets(engine, Fernet.generate_key())
    with pytest.raises(SecretDecryptError) as info:
        other.get("x")
    assert info.value.message.startswith(
        "cannot decrypt secret 'x': the master key differs from the one it was written with"
    )
    assert "written-with-the-first-key" not in info.value.message
    assert other.names() == ["x"]  # names stay readable


# -- the master key --------------------------------------------------------------------------


def test_master_key_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DAGWRIGHT_SECRET_KEY", KEY.decode())
    assert master_key_from(tmp_path, load_settings().secret_key) == KEY
    assert not (tmp_path / "secret.key").exists()


def test_a_bad_master_key_in_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAGWRIGHT_SECRET_KEY", "not-a-key")
    with pytest.raises(MasterKeyError, match="DAGWRIGHT_SECRET_KEY is not a Fernet key"):
        master_key_from(tmp_path, load_settings().secret_key)


def test_a_key_file_is_made_once_readable_by_its_owner_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DAGWRIGHT_SECRET_KEY", raising=False)
    data = tmp_path / "data"
    key = master_key_from(data, load_settings().secret_key)
    path = data / "secret.key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().strip() == key
    Fernet(key)  # a usable key
    assert master_key_from(data) == key


def test_a_damaged_key_file_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DAGWRIGHT_SECRET_KEY", raising=False)
    (tmp_path / "secret.key").write_text("garbage\n")
    with pytest.raises(MasterKeyError, match=r"secret\.key is not a Fernet key"):
        master_key_from(tmp_path)


def test_a_bad_key_given_directly(engine: Engine) -> None:
    with pytest.raises(MasterKeyError, match="the master key is not a Fernet key"):
        DatabaseSecrets(engine, b"short")
