"""What table blocks ask a run for: the query engine over the registered data sources.

An interface of its own (as `invocation.AppInvoker` is) so that blocks and the runtime need
not import the data layer, whose DuckDB and Arrow take over a second to import: the engine
is built the first time a block asks for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dagwright.data.engine import QueryEngine


class TableAccess:
    """The engine over every registered source, made by `factory` on first use."""

    def __init__(self, factory: Callable[[], QueryEngine]) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._engine: QueryEngine | None = None

    def engine(self) -> QueryEngine:
        with self._lock:
            if self._engine is None:
                self._engine = self._factory()
            return self._engine

    def close(self) -> None:
        """Closes the engine and its sources, if they were opened."""
        with self._lock:
            engine, self._engine = self._engine, None
        if engine is not None:
            engine.catalog.close()
            engine.close()
