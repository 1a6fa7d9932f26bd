"""The services a run gives its blocks, looked up by class (`ctx.service(LLMGateway)`).

`BlockServices` holds instances and factories: a factory is named by its service class's
import path, so the class's module is not imported until a block asks for it (the model
gateway, Qdrant and the data layer are most of a cold start)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping


def service_key(kind: type) -> str:
    """A service class's import path: how a factory names the class it builds."""
    return f"{kind.__module__}.{kind.__qualname__}"


class BlockServices(Mapping[type, object]):
    """The run's services by class, each built on its first lookup. Lookups may come from
    blocks running in threads: building is done once, under a lock."""

    def __init__(self, ready: Mapping[type, object] | None = None) -> None:
        self._ready: dict[type, object] = dict(ready or {})
        self._factories: dict[str, Callable[[], object]] = {}
        self._lock = threading.Lock()

    def provide(self, kind: type, service: object) -> None:
        self._ready[kind] = service

    def provide_lazily(self, import_path: str, factory: Callable[[], object]) -> None:
        """`factory` builds the service of the class at `import_path` when first asked for."""
        self._factories[import_path] = factory

    def __getitem__(self, kind: type) -> object:
        found = self._ready.get(kind)
        if found is not None:
            return found
        if not isinstance(kind, type) or service_key(kind) not in self._factories:
            raise KeyError(kind)
        with self._lock:
            found = self._ready.get(kind)
            if found is None:
                found = self._factories.pop(service_key(kind))()
                self._ready[kind] = found
            return found

    def __iter__(self) -> Iterator[type]:
        return iter(self._ready)  # the services built so far

    def __len__(self) -> int:
        return len(self._ready)

    def built(self) -> list[str]:
        """Import paths of the services built so far (for tests and benchmarks)."""
        return sorted(service_key(kind) for kind in self._ready)
