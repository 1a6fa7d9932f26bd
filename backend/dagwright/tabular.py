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
    from dagwright.data.table_catalogue import CatalogueOptions, Embed, TableCatalogue, Vectors
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
        self,
        factory: Callable[[], QueryEngine],
        embedders: EmbedderFactory | None = None,
        catalogue: CatalogueOptions | None = None,
        *,
        ttls: Callable[[str], float | None] | None = None,
    ) -> None:
        """``catalogue``: where and how the stored table catalogue is kept (None: in
        memory, with its defaults). ``ttls``: a source's own catalogue TTL (None: the
        options')."""
        self._ttls = ttls
        self._factory = factory
        self._embedders = embedders or _local_embedders()
        self._lock = threading.Lock()
        self._engine: QueryEngine | None = None
        self._catalogue_options = catalogue
        self._catalogue: TableCatalogue | None = None

    def engine(self) -> QueryEngine:
        with self._lock:
            if self._engine is None:
                self._engine = self._factory()
            return self._engine

    def catalogue(self) -> TableCatalogue:
        """The stored catalogue of the engine's tables, the index questions search."""
        from dagwright.data.table_catalogue import TableCatalogue

        engine = self.engine()
        with self._lock:
            if self._catalogue is None:
                options = self._catalogue_options
                spec = options.embedder if options is not None else None
                embed = sync_embed(self._embedders(spec)) if spec else None
                self._catalogue = TableCatalogue(
                    engine.catalog, options, embed=embed, ttls=self._ttls
                )
            return self._catalogue

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
            catalogue, self._catalogue = self._catalogue, None
        if catalogue is not None:
            catalogue.close()
        if engine is not None:
            engine.catalog.close()
            engine.close()


def sync_embed(embedder: Embedder) -> Embed:
    """The embedder as the catalogue calls it, from a worker thread: a local model's own
    synchronous pass when it has one (no event loop per call), else its coroutine run on a
    loop of the calling thread's own (on a thread of its own when that thread runs one)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    import numpy as np

    inner = getattr(embedder, "inner", embedder)  # a CachedEmbedder's model
    direct = getattr(inner, "embed_sync", None)

    def embed(texts: list[str]) -> Vectors:
        if callable(direct):
            rows = direct(texts)
        else:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                rows = asyncio.run(embedder.embed(texts))
            else:
                with ThreadPoolExecutor(1) as aside:
                    rows = aside.submit(asyncio.run, embedder.embed(texts)).result()
        return np.asarray(rows, dtype=np.float32)

    return embed
