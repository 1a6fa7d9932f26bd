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
from collections.abc import Callable
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
    """Entries kept `ttl` seconds, each loaded by one database read in a thread however many
    callers miss it at once. An expired entry is still answered while its one refresh runs:
    under load every entry used to expire for all callers together, and each started a read
    of its own — a hundred reads queued on the loop's few threads every `ttl` seconds, which
    was the published endpoints' p99 (benchmarks/server_throughput.py)."""

    def __init__(self, ttl: float, size: int = 4096) -> None:
        self._ttl = ttl
        self._size = size
        self._entries: dict[str, _Entry[T]] = {}
        self._loading: dict[str, asyncio.Future[T | None]] = {}
        self._generation = 0  # a load started before a clear() must not refill the cache
        self._loop: asyncio.AbstractEventLoop | None = None  # the one loop the cache is used on

    async def get(self, key: str, load: Callable[[], T | None]) -> T | None:
        """The entry for `key`, loading it (`load` in a thread) when absent or expired; a
        None from `load` is not kept, and drops what was kept."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        entry = self._entries.get(key)
        if entry is not None and entry.expires >= time.monotonic():
            return entry.value
        pending = self._loading.get(key)
        if pending is None:
            pending = asyncio.ensure_future(asyncio.to_thread(load))
            self._loading[key] = pending
            generation = self._generation
            pending.add_done_callback(lambda done: self._loaded(key, generation, done))
        if entry is not None:
            return entry.value
        return await asyncio.shield(pending)

    def _loaded(self, key: str, generation: int, done: asyncio.Future[T | None]) -> None:
        if self._loading.get(key) is done:
            del self._loading[key]
        if generation != self._generation:
            return
        value = None if done.cancelled() or done.exception() is not None else done.result()
        if value is None:  # not found, failed: the next caller asks the database itself
            self._entries.pop(key, None)
            return
        if len(self._entries) >= self._size:
            self._entries.clear()  # rare: a cache this size is a working set, not a store
        self._entries[key] = _Entry(value, time.monotonic() + self._ttl)

    def clear(self) -> None:
        """Forget every entry. Changes are announced from the threads sync routes run in:
        the clearing is handed to the loop, so that it never interleaves with a load's
        completion there (which could refill the cache after it). Handed over before the
        route's own answer, it takes effect before the change is answered."""
        loop = self._loop
        if loop is not None and not loop.is_closed() and not _running_on(loop):
            loop.call_soon_threadsafe(self._clear)
        else:
            self._clear()

    def _clear(self) -> None:
        self._generation += 1
        self._entries.clear()
        self._loading.clear()


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


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
        # Unknown keys are not cached (a None is not kept): a new key works at once.
        return await self._verified.get(key_hash(plaintext), lambda: self._keys.verify(plaintext))

    async def app(self, ref: str) -> App:
        found = await self._app_rows.get(ref, lambda: self._apps.get_app(ref))
        assert found is not None  # get_app raises NotFoundError
        return found

    async def endpoint(self, app_ref: str, version: str | None) -> Endpoint:
        """The app and the compiled version a call runs: the published one unless pinned."""
        cache_key = f"{app_ref}\0{version or ''}"
        found = await self._endpoints.get(cache_key, lambda: self._resolve(app_ref, version))
        assert found is not None  # _resolve raises NotFoundError
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
