"""Reading a table's splits for DuckDB: worker threads read splits in parallel into a small
queue, and one RecordBatchReader hands the batches to DuckDB as it asks for them.

The workers start on DuckDB's first request, so a query DuckDB rejects while binding reads
nothing, and a LIMIT that DuckDB satisfies early stops the reading (the workers notice at
their next batch). Waiting for a batch never outlasts the query's deadline: the time spent
reading sources counts in the time limit, even when a source hangs.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Generator, Iterator, Sequence

import pyarrow as pa

from dagwright.data.connector import Connector, Split
from dagwright.errors import DataError, DataSourceError, QueryError

# Splits one table reads at once, and batches read ahead per table.
WORKERS = 4
READ_AHEAD = 8
# How often a worker blocked on a full queue checks whether it should stop.
POLL_S = 0.1


class _Done:
    """A worker has no more splits."""


class SourceStream:
    """The rows of one table's splits, in ``schema`` (nullable fields, as DuckDB takes them)."""

    def __init__(
        self,
        connector: Connector,
        splits: Sequence[Split],
        schema: pa.Schema,
        deadline: float,
        label: str,
    ) -> None:
        self.connector = connector
        self.splits = list(splits)
        self.schema = pa.schema([pa.field(f.name, f.type) for f in schema])
        self.deadline = deadline
        self.label = label
        self.rows = 0
        self.error: DataError | None = None
        self._pending = list(reversed(self.splits))
        self._lock = threading.Lock()
        self._queue: queue.Queue[pa.RecordBatch | BaseException | _Done] = queue.Queue(READ_AHEAD)
        self._stop = threading.Event()
        self._workers = min(WORKERS, len(self.splits))
        self._started = False

    def reader(self) -> pa.RecordBatchReader:
        """The batches as a reader DuckDB scans once, as the query runs."""
        return pa.RecordBatchReader.from_batches(self.schema, self._batches())

    def table(self) -> pa.Table:
        """Every batch, read now (for tables DuckDB may scan more than once)."""
        return pa.Table.from_batches(list(self._batches()), schema=self.schema)

    def close(self) -> None:
        """Tells the workers to stop (each finishes the batch it is reading)."""
        self._stop.set()

    def _batches(self) -> Iterator[pa.RecordBatch]:
        self._start()
        finished = 0
        try:
            while finished < self._workers:
                remaining = self.deadline - time.monotonic()
                try:
                    if remaining <= 0:
                        raise queue.Empty
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    raise self._fail(
                        QueryError(
                            f"the query ran past its time limit while reading {self.label}",
                            code="query_timeout",
                        )
                    ) from None
                if isinstance(item, _Done):
                    finished += 1
                elif isinstance(item, BaseException):
                    raise self._fail(item)
                else:
                    batch = self._conform(item)
                    self.rows += batch.num_rows
                    yield batch
        finally:
            self.close()

    def _start(self) -> None:
        if self._started:
            return
        self._started = True
        for index in range(self._workers):
            threading.Thread(
                target=self._work, name=f"dagwright-read-{self.label}-{index}", daemon=True
            ).start()

    def _work(self) -> None:
        try:
            while not self._stop.is_set():
                with self._lock:
                    if not self._pending:
                        break
                    split = self._pending.pop()
                batches = self.connector.read(split)
                try:
                    for batch in batches:
                        if self._stop.is_set() or not self._put(batch):
                            return
                finally:
                    if isinstance(batches, Generator):
                        batches.close()  # closes the source's cursor and connection now
        except BaseException as exc:  # handed to the reader, which raises it in the query
            self._put(exc)
        finally:
            self._put(_Done())

    def _put(self, item: pa.RecordBatch | BaseException | _Done) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        """The batch in the stream's schema: a connector's batch with other (castable) types
        is cast; one with other columns is a connector bug, reported as such."""
        if batch.schema.equals(self.schema):
            return batch
        if batch.schema.names != self.schema.names:
            raise self._fail(
                DataSourceError(
                    f"{self.label}: the connector returned columns {batch.schema.names},"
                    f" expected {self.schema.names}",
                    source=self.connector.source,
                )
            )
        try:
            arrays = [batch.column(i).cast(f.type) for i, f in enumerate(self.schema)]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise self._fail(
                DataSourceError(
                    f"{self.label}: a value does not fit its column's type: {exc}",
                    code="bad_value",
                    source=self.connector.source,
                )
            ) from exc
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def _fail(self, exc: BaseException) -> DataError:
        """Records the first failure (the engine raises it instead of DuckDB's wrapper)."""
        if not isinstance(exc, DataError):
            exc = DataSourceError(
                f"reading {self.label} failed: {type(exc).__name__}: {exc}",
                source=self.connector.source,
            )
        if self.error is None:
            self.error = exc
        self.close()
        return exc
