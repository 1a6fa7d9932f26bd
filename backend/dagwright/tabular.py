"""The table service's lazy holder: the query engine over the registered data sources and
the process's embedders (blocks see it as `registry.services.Tables`).

The engine is built the first time a block asks for it, so that servers and flows that use
no table do not import the data layer, whose DuckDB and Arrow take over a second to import.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagwright.data.engine import QueryEngine
    from dagwright.embedding.embedder import Embedder

# An embedder by its spec ("hashing:256", "minilm", "openai:<provider>"): the process's.
EmbedderFactory = Callable[[str], "Embedder"]


def _local_embedders() -> EmbedderFactory:
    """Embedders without a model gateway (local ones; a provider's is refused), one per spec."""
    made: dict[str, Embedder] = {}
    lock = threading.Lock()

    def embedder(spec: str) -> Embedder:
        from dagwright.embedding.embedders import CachedEmbedder, make_embedder

        with lock:
            if spec not in made:
                made[spec] = CachedEmbedder(make_embedder(spec, None))
            return made[spec]

    return embedder


class TableAccess:
    """The engine over every registered source, made by `factory` on first use, and the
    embedders that rank its tables by meaning (`embedders`: the process's)."""

    def __init__(
        self, factory: Callable[[], QueryEngine], embedders: EmbedderFactory | None = None
    ) -> None:
        self._factory = factory
        self._embedders = embedders or _local_embedders()
        self._lock = threading.Lock()
        self._engine: QueryEngine | None = None

    def engine(self) -> QueryEngine:
        with self._lock:
            if self._engine is None:
                self._engine = self._factory()
            return self._engine

    def embedder(self, spec: str) -> Embedder:
        """The embedder of this spec, as the process makes it (a provider's goes through the
        process's model gateway, built when first needed)."""
        return self._embedders(spec)

    def interrupt_queries(self) -> None:
        """Interrupts the engine's running queries, if it was opened (the server stops)."""
        with self._lock:
            engine = self._engine
        if engine is not None:
            engine.interrupt_queries()

    def close(self) -> None:
        """Closes the engine and its sources, if they were opened."""
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.catalog.close()
            engine.close()
