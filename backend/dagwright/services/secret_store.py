"""Secrets kept in the database, encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256).

The master key is not in the database: it comes from DAGWRIGHT_SECRET_KEY or from a key file
in the data directory, so a copy of the database alone reveals no secret. Values are never
logged, and `names()` returns names only.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from sqlalchemy import Engine

from dagwright.errors import ConflictError, DagwrightError, InputError
from dagwright.secrets import SecretNotFoundError, check_secret_name
from dagwright.store.db import session
from dagwright.store.secrets import SecretRepository

SECRET_KEY_ENV = "DAGWRIGHT_SECRET_KEY"
KEY_FILE = "secret.key"


class MasterKeyError(DagwrightError):
    """The master key is missing or is not a Fernet key."""

    code = "master_key"


class SecretDecryptError(DagwrightError):
    """A stored secret cannot be decrypted with this master key."""

    code = "secret_undecryptable"

    def __init__(self, name: str) -> None:
        super().__init__(
            f"cannot decrypt secret {name!r}: the master key differs from the one it was "
            f"written with (check {SECRET_KEY_ENV} or the {KEY_FILE} file), or the stored "
            "value was altered"
        )
        self.name = name


class SecretNameError(InputError, ValueError):
    """An invalid secret name: an InputError for the API, a ValueError as `Secrets` says."""


def _fernet(key: bytes, source: str) -> Fernet:
    try:
        return Fernet(key)
    except (ValueError, TypeError):
        raise MasterKeyError(
            f"{source} is not a Fernet key (32 url-safe base64-encoded bytes); make one with "
            "`python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'`"
        ) from None


def _read_key_file(path: Path) -> bytes:
    # Another process may have just created the file and not yet written it: wait a little.
    for _ in range(50):
        key = path.read_bytes().strip()
        if key:
            return key
        time.sleep(0.02)
    raise MasterKeyError(f"the key file {path} is empty")


def master_key_from(data_dir: Path, configured: str | None = None) -> bytes:
    """`configured` (DAGWRIGHT_SECRET_KEY) when given, else the key in <data_dir>/secret.key,
    created (readable by its owner only) the first time."""
    if configured:
        key = configured.strip().encode("ascii", errors="replace")
        _fernet(key, SECRET_KEY_ENV)
        return key
    path = data_dir / KEY_FILE
    if not path.exists():
        data_dir.mkdir(parents=True, exist_ok=True)
        key = Fernet.generate_key()
        try:
            # O_EXCL: of processes starting together, one creates the key, the others read it.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "wb") as file:
                file.write(key + b"\n")
                file.flush()
                os.fsync(file.fileno())
            return key
    key = _read_key_file(path)
    _fernet(key, f"the key file {path}")
    return key


def _check_name(name: str) -> str:
    try:
        return check_secret_name(name)
    except ValueError as exc:
        raise SecretNameError(str(exc)) from None


class DatabaseSecrets:
    def __init__(self, engine: Engine, master_key: bytes) -> None:
        self._engine = engine
        self._fernet = _fernet(master_key, "the master key")

    def get(self, name: str) -> str:
        _check_name(name)
        with session(self._engine) as db:
            ciphertext = SecretRepository(db).ciphertext(name)
        if ciphertext is None:
            raise SecretNotFoundError(
                name, f"secret {name!r} is not set: add it to the secret store"
            )
        try:
            return self._fernet.decrypt(ciphertext.encode("ascii")).decode("utf-8")
        except InvalidToken:
            raise SecretDecryptError(name) from None

    def names(self) -> list[str]:
        with session(self._engine) as db:
            return SecretRepository(db).names()

    def set(self, name: str, value: str) -> None:
        """Creates the secret or replaces its value."""
        _check_name(name)
        if not isinstance(value, str) or not value:
            # As with environment secrets: an empty value is a mistake, not a credential.
            raise InputError(f"secret {name!r}: the value must be non-empty text")
        ciphertext = self._fernet.encrypt(value.encode("utf-8")).decode("ascii")
        for _attempt in range(2):
            with session(self._engine) as db:
                if SecretRepository(db).put(name, ciphertext):
                    db.commit()
                    return
            # Created by a concurrent call since it was looked up: replace it instead.
        raise ConflictError(f"secret {name!r}: written concurrently, try again", "secret_busy")

    def delete(self, name: str) -> None:
        _check_name(name)
        with session(self._engine) as db:
            if not SecretRepository(db).delete(name):
                raise SecretNotFoundError(name, f"secret {name!r} is not set")
            db.commit()
