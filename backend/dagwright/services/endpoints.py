"""The hot path of published endpoints: which app a slug names, which version it runs and
whether a key is valid, answered from memory for a few seconds at a time.

Without this, every call made three database reads (key, app, version with its graph) in
worker threads, which capped a replica at ~200 calls/s. Changes made through this process
(publish, rename, delete, revoke) take effect at once: the resolver listens to the app and
key services' announcements; changes made by another replica within `ttl` seconds.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Generic, TypeVar

from dagwright.runtime import CompiledFlow
from dagwright.services.apps import AppService
from dagwright.services.changes import Change
from dagwright.services.keys import KeyService, key_hash
from dagwright.store.models import ApiKey, App

T = TypeVar("T")


@dataclass(slots=True, frozen=True)
class Endpoint:
    app: App
    version_id: str
    plan: CompiledFlow


@dataclass(slots=True)
class _Entry(Generic[T]):
    value: T
    expires: float


class _TtlCache(Generic[T]):
    def __init__(self, ttl: float, size: int = 4096) -> None:
        self._ttl = ttl
        self._size = size
        self._entries: dict[str, _Entry[T]] = {}

    def get(self, key: str) -> T | None:
        entry = self._entries.get(key)
        if entry is None or entry.expires < time.monotonic():
            return None
        return entry.value

    def put(self, key: str, value: T) -> None:
        if len(self._entries) >= self._size:
            self._entries.clear()  # rare: a cache this size is a working set, not a store
        self._entries[key] = _Entry(value, time.monotonic() + self._ttl)

    def clear(self) -> None:
        self._entries.clear()


class EndpointResolver:
    def __init__(self, apps: AppService, keys: KeyService, ttl: float = 2.0) -> None:
        self._apps = apps
        self._keys = keys
        self._app_rows: _TtlCache[App] = _TtlCache(ttl)
        self._endpoints: _TtlCache[Endpoint] = _TtlCache(ttl)
        self._verified: _TtlCache[ApiKey] = _TtlCache(ttl)
        apps.changes.subscribe(self._forget)
        keys.changes.subscribe(self._forget)

    async def key(self, plaintext: str) -> ApiKey | None:
        digest = key_hash(plaintext)
        found = self._verified.get(digest)
        if found is None:
            found = await asyncio.to_thread(self._keys.verify, plaintext)
            if found is not None:  # unknown keys are not cached: a new key works at once
                self._verified.put(digest, found)
        return found

    async def app(self, ref: str) -> App:
        found = self._app_rows.get(ref)
        if found is None:
            found = await asyncio.to_thread(self._apps.get_app, ref)
            self._app_rows.put(ref, found)
        return found

    async def endpoint(self, app_ref: str, version: str | None) -> Endpoint:
        """The app and the compiled version a call runs: the published one unless pinned."""
        cache_key = f"{app_ref}\0{version or ''}"
        found = self._endpoints.get(cache_key)
        if found is None:
            found = await asyncio.to_thread(self._resolve, app_ref, version)
            self._endpoints.put(cache_key, found)
        return found

    def _resolve(self, app_ref: str, version: str | None) -> Endpoint:
        app = self._apps.get_app(app_ref)
        row = self._apps.get_version(app.id, version or "published")
        return Endpoint(app, row.id, self._apps.compiled(row))

    def _forget(self, change: Change) -> None:
        """Drop everything cached when an app is renamed, deleted or published, or a key
        revoked (which entries depend on it is not worth working out: it is rare). What is
        created needs nothing: unknown apps, versions and keys are never cached."""
        if change.action == "created":
            return
        self._app_rows.clear()
        self._endpoints.clear()
        self._verified.clear()
