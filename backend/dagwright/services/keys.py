"""Per-app API keys for published endpoints.

A key is shown once, when it is created; the database keeps its SHA-256 (a key is 256 random
bits, so a plain fast hash is enough: there is nothing to guess) and its first characters, so
people can tell their keys apart.
"""

from __future__ import annotations

import builtins
import hashlib
import secrets
from datetime import timedelta

from sqlalchemy import Engine

from dagwright.errors import InputError
from dagwright.services.changes import Change, Changes
from dagwright.store.db import session
from dagwright.store.keys import KeyRepository
from dagwright.store.models import ApiKey, utcnow

KEY_PREFIX = "dw_"
SHOWN_PREFIX = 10  # characters kept in clear: "dw_" and 7 more
MAX_NAME = 100
# A busy endpoint verifies its key on every call: last_used_at is written at most this often.
LAST_USED_EVERY = timedelta(minutes=1)


def key_hash(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode("utf-8")).hexdigest()


class KeyService:
    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self.changes = Changes()  # keys created and revoked

    def create(self, app_id: str, name: str) -> tuple[ApiKey, str]:
        """A new key for the app: the row, and the plaintext, which is never stored."""
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
            raise InputError(f"name: give the key a name of 1 to {MAX_NAME} characters")
        plaintext = KEY_PREFIX + secrets.token_urlsafe(32)
        key = ApiKey(
            app_id=app_id,
            name=name,
            prefix=plaintext[:SHOWN_PREFIX],
            hash=key_hash(plaintext),
        )
        with session(self._engine) as db:
            KeyRepository(db).add(key)
            db.commit()
        self.changes.announce(Change("key", "created", key.id))
        return key, plaintext

    def list(self, app_id: str) -> builtins.list[ApiKey]:
        """The app's keys, revoked ones included, oldest first."""
        with session(self._engine) as db:
            return KeyRepository(db).of_app(app_id)

    def revoke(self, app_id: str, key_id: str) -> ApiKey:
        """Revokes the key (again is fine: the first revocation time stays)."""
        with session(self._engine) as db:
            key = KeyRepository(db).find(app_id, key_id)
            if key.revoked_at is not None:
                return key
            key.revoked_at = utcnow()
            db.commit()
        self.changes.announce(Change("key", "revoked", key.id))
        return key

    def verify(self, plaintext: str) -> ApiKey | None:
        """The key's row when the key is known and not revoked, else None."""
        if not isinstance(plaintext, str) or not plaintext.startswith(KEY_PREFIX):
            return None
        with session(self._engine) as db:
            store = KeyRepository(db)
            key = store.by_hash(key_hash(plaintext))
            if key is None or key.revoked_at is not None:
                return None
            now = utcnow()
            cutoff = now - LAST_USED_EVERY
            if key.last_used_at is None or key.last_used_at <= cutoff:
                store.mark_used(key, now, unless_since=cutoff)
                db.commit()
            db.expunge(key)
        if key.last_used_at is None or key.last_used_at <= cutoff:
            key.last_used_at = now  # what the database now holds (or a moment's difference)
        return key
