"""The stored table catalogue: what every table of every source is (columns, types,
comments, keys, row estimate, a few distinct values per column), read once per source, kept
on disk, refreshed incrementally, and indexed for retrieval.

A question used to describe and sample every table of every source before ranking them
(`schema_lookup`): its cost grew with the catalogue. Here the reading happens once, at
refresh, and a question asks the index (BM25 over table and column names, comments and
values, scored as data/schema_lookup.py scores) for its candidate tables; only those are then
described and sampled.

With an embedder (``CatalogueOptions.embedder``, the process's embedding service), each
table's document also gets a vector at refresh, and a search takes the union of the lexical
top k and the semantic top k (cosine of the question's vector with each table's: one matrix
product per source): a table sharing no word with the question ("cost" against a column
"amount") is still a candidate. Only the tables a refresh reads again are embedded again.

Freshness, per table:

- a source whose connector has a cheap change stamp (files: each file's size and mtime)
  re-reads exactly the tables whose stamp changed;
- one without (databases) re-reads a table once its entry is older than ``ttl_s``;
- a source is re-listed (new tables read, vanished ones dropped) when its catalogue is older
  than ``check_s``: in the background, a question meanwhile answered from what is stored.
  Only a source never read before is read while the question waits.

Kept as one JSON file per source in ``<data dir>/catalogue`` (not in the store database):
it is a cache of what the sources say, rebuilt from them at will, written by whichever
process refreshes, and as large as the catalogue (values included); a file per source is
replaced atomically and needs no migration. A file that does not parse, or was written for
another configuration of the source, is ignored and the source read again. The vectors are a
float32 ``<source>.npy`` beside it (rows in the JSON's entry order), its embedder and digest
recorded in the JSON: vectors of another embedder, or not the ones the JSON was written with,
are not used (the source searched lexically until its next refresh embeds it again).
"""

from __future__ import annotations

import contextlib
import hashlib
import heapq
import json
import logging
import os
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from pydantic import BaseModel

from dagwright.data.catalog import Catalog, TableRef
from dagwright.data.connector import Connector, TableInfo
from dagwright.data.schema_lookup import bm25_term, words
from dagwright.errors import DataError

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
EMBED_BATCH = 256  # documents per call of the embedder at refresh
MAX_DOCUMENT_CHARS = 1000  # an embedder reads a table's names and comments, not a book

Vectors = npt.NDArray[np.float32]
# Texts -> one unit-length vector each (a row per text): the process's embedder, run from a
# refresh's or a question's worker thread.
Embed = Callable[[list[str]], Vectors]
MAX_VALUE_CHARS = 100  # a value longer than this is cut: a document, not a copy of the data
PROGRESS_EVERY = 50  # tables between two progress reports
DRAIN_ROWS = 20_000  # a sampled table this small is read to its end (see _values)


@dataclass(frozen=True, slots=True)
class CatalogueOptions:
    """``folder``: where the catalogue is kept (None: in memory only). ``check_s``: a
    source's catalogue older than this is re-listed. ``ttl_s``: a table without a change
    stamp is re-read past this age. ``sample_rows``: rows read per table for its distinct
    values (0: none), at most ``max_values`` values kept per column. ``embedder``: the spec
    of the embedder the tables' documents are embedded with (None: lexical index only)."""

    folder: Path | None = None
    check_s: float = 60.0
    ttl_s: float = 3600.0
    sample_rows: int = 20
    max_values: int = 20
    embedder: str | None = None


@dataclass(slots=True)
class TableEntry:
    """What the catalogue knows of one table."""

    name: str  # source.schema.table, as SQL names it
    source: str
    schema: str
    table: str
    columns: list[tuple[str, str, str | None]]  # name, source type, comment
    comment: str | None
    row_estimate: int | None
    primary_key: list[str]
    references: list[str]  # the tables its foreign keys point at (source.schema.table)
    values: dict[str, list[str]]  # column -> distinct sample values
    stamp: str | None  # the connector's change stamp when it read the table
    read_at: float  # wall-clock seconds

    def words(self) -> list[str]:
        """The table's document: its name twice (the strongest hint), its comment, each
        column's name, comment and values."""
        parts = [self.table, self.table, self.comment or ""]
        for name, _, comment in self.columns:
            parts += [name, comment or "", " ".join(self.values.get(name, ()))]
        return words(" ".join(parts))

    def text(self) -> str:
        """What the embedder reads: the table's and columns' names (split into words) and
        comments. Values are left to the lexical index (literals are its strength), and a
        short text keeps a refresh's embedding cheap."""
        parts = [" ".join(words(self.table)), self.comment or ""]
        for name, _, comment in self.columns:
            parts.append(" ".join(words(name)) + (f" ({comment})" if comment else ""))
        return ", ".join(part for part in parts if part)[:MAX_DOCUMENT_CHARS]


@dataclass(slots=True)
class RefreshStatus:
    """Where a source's refresh is: ``state`` running, done, failed or cancelled (the
    catalogue closed, or the source was replaced meanwhile); counts of tables listed, done
    so far, read again, kept (unchanged) and dropped (gone), the tables that could not be
    read (with why), and the error that stopped it."""

    source: str
    state: str = "running"
    tables: int = 0
    done: int = 0
    read: int = 0
    kept: int = 0
    dropped: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    error: str | None = None
    started_at: float = 0.0
    finished_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        # Copied field by field: a background refresh may be adding to `failed` meanwhile.
        shown = {name: getattr(self, name) for name in self.__slots__ if name != "failed"}
        return {**shown, "failed": dict(self.failed)}


class _SourceIndex:
    """The postings of one source's table documents: token -> [(entry, term count)]."""

    def __init__(self, entries: Sequence[TableEntry]) -> None:
        self.entries = list(entries)
        self.lengths: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for index, entry in enumerate(self.entries):
            counts = Counter(entry.words())
            self.lengths.append(sum(counts.values()))
            for token, count in counts.items():
                self.postings.setdefault(token, []).append((index, count))
        self.total_length = sum(self.lengths)


@dataclass(slots=True)
class _Stored:
    fingerprint: str
    checked_at: float  # wall clock: when the source was last listed
    entries: dict[str, TableEntry]
    index: _SourceIndex
    # One unit row per entry, in index.entries' order (None: no embedder, or not embedded).
    vectors: Vectors | None = None
    embedder: str | None = None

    def vector_of(self) -> dict[str, Vectors]:
        """Each entry's vector by table name (none without vectors)."""
        if self.vectors is None:
            return {}
        return {entry.name: self.vectors[i] for i, entry in enumerate(self.index.entries)}


class TableCatalogue:
    """The catalogue of every source of ``catalog``. Thread-safe: questions search while a
    source refreshes (its index is swapped whole when the refresh ends)."""

    def __init__(
        self,
        catalog: Catalog,
        options: CatalogueOptions | None = None,
        *,
        clock: Callable[[], float] = time.time,
        embed: Embed | None = None,
        ttls: Callable[[str], float | None] | None = None,
    ) -> None:
        """``embed``: the embedder of ``options.embedder`` (None: the index is lexical).
        ``ttls``: a source's own TTL, asked once per refresh (None: ``options.ttl_s``)."""
        self._ttls = ttls
        self.catalog = catalog
        self.options = options or CatalogueOptions()
        self._clock = clock
        self._embed = embed
        self._embedder = (self.options.embedder or "embedder") if embed is not None else None
        self._lock = threading.Lock()
        self._stored: dict[str, _Stored] = {}
        self._status: dict[str, RefreshStatus] = {}
        self._source_locks: dict[str, threading.Lock] = {}
        # Stale sources are refreshed here, one at a time, never on a request's thread.
        self._background = ThreadPoolExecutor(1, thread_name_prefix="dagwright-catalogue")
        self._pending: set[str] = set()
        self._closing = threading.Event()  # set by close: a refresh under way stops

    # -- retrieval ---------------------------------------------------------------------------

    def search(
        self, question: str, k: int, sources: Iterable[str] | None = None
    ) -> list[TableEntry]:
        """The ``k`` tables whose documents best match ``question`` (BM25), best first, of
        ``sources`` (None: every source), then - with an embedder - the ``k`` nearest by
        meaning not among them; tables matching no word of it are found only by meaning. A
        source never read is read first; a stale one is refreshed in the background."""
        stored = self._sources(sources)
        lexical = self._lexical(question, k, [s.index for s in stored])
        if self._embed is None or not question.strip():
            return lexical
        seen = {entry.name for entry in lexical}
        semantic = [e for e in self._semantic(question, k, stored) if e.name not in seen]
        return lexical + semantic

    def _lexical(self, question: str, k: int, indexes: list[_SourceIndex]) -> list[TableEntry]:
        query = set(words(question))
        count = sum(len(index.entries) for index in indexes)
        if not query or count == 0:
            return []
        average = sum(index.total_length for index in indexes) / count or 1.0
        frequency = {
            token: sum(len(index.postings.get(token, ())) for index in indexes) for token in query
        }
        scores: dict[tuple[int, int], float] = {}
        for which, index in enumerate(indexes):
            for token in query:
                df = frequency[token]
                for entry, tf in index.postings.get(token, ()):
                    key = (which, entry)
                    term = bm25_term(tf, df, count, index.lengths[entry], average)
                    scores[key] = scores.get(key, 0.0) + term
        best = heapq.nlargest(k, scores.items(), key=lambda item: (item[1], -item[0][0]))
        return [indexes[which].entries[entry] for (which, entry), _ in best]

    def _semantic(self, question: str, k: int, stored: list[_Stored]) -> list[TableEntry]:
        """The ``k`` tables of embedded sources nearest the question by cosine: one vector
        for the question, one matrix product per source, one partial sort of the scores."""
        embedded = [s for s in stored if s.vectors is not None and len(s.vectors)]
        if not embedded or self._embed is None or k <= 0:
            return []
        query = self._embed([question])[0]
        scores = np.concatenate([s.vectors @ query for s in embedded if s.vectors is not None])
        entries = [entry for s in embedded for entry in s.index.entries]
        top = min(k, len(scores))
        best = np.argpartition(-scores, top - 1)[:top]
        best = best[np.argsort(-scores[best], kind="stable")]
        return [entries[int(i)] for i in best]

    def entry(self, name: str) -> TableEntry | None:
        """The stored entry of ``source.schema.table``, if any (never reads a source)."""
        with self._lock:
            stored = self._stored.get(name.split(".", 1)[0])
        return stored.entries.get(name) if stored is not None else None

    def size(self, sources: Iterable[str] | None = None) -> int:
        """How many tables the catalogue holds (of ``sources``), reading none."""
        with self._lock:
            chosen = self._stored if sources is None else set(sources)
            return sum(len(self._stored[s].entries) for s in chosen if s in self._stored)

    def _sources(self, sources: Iterable[str] | None) -> list[_Stored]:
        names = self.catalog.names()
        wanted = names if sources is None else [name for name in names if name in set(sources)]
        found = []
        for name in wanted:
            stored = self._ready(name)
            if stored is not None:
                found.append(stored)
        return found

    def _ready(self, source: str) -> _Stored | None:
        """The source's stored catalogue: from memory, else from its file, else read now
        (None when it cannot be read: a source that is down has no candidates). A stale one
        is returned as it is and refreshed in the background."""
        with self._lock:
            stored = self._stored.get(source)
        if stored is None:
            stored = self._load(source)
            if stored is None:
                try:
                    self.refresh(source)
                except DataError as exc:
                    log.warning("catalogue: source %s could not be read: %s", source, exc)
                    return None
                with self._lock:
                    return self._stored.get(source)
            with self._lock:
                self._stored.setdefault(source, stored)
        if self._clock() - stored.checked_at >= self.options.check_s:
            self._refresh_later(source)
        return stored

    def _refresh_later(self, source: str) -> None:
        with self._lock:
            if source in self._pending:
                return
            self._pending.add(source)

        def run() -> None:
            try:
                self.refresh(source)
            except DataError as exc:
                log.warning("catalogue: refreshing source %s failed: %s", source, exc)
            finally:
                with self._lock:
                    self._pending.discard(source)

        self._background.submit(run)

    # -- refreshing --------------------------------------------------------------------------

    def refresh(
        self,
        source: str,
        *,
        force: bool = False,
        progress: Callable[[RefreshStatus], None] | None = None,
    ) -> RefreshStatus:
        """Lists the source's tables and reads those that are new, changed (their stamp) or,
        without a stamp, older than the TTL (``force``: every table); stores and indexes the
        result. A table that cannot be read is reported in ``failed`` and keeps its previous
        entry; a source that cannot be listed raises its DataError (what is stored stays)."""
        connector = self.catalog.source(source)  # source_not_found for an unknown name
        with self._source_lock(source):
            status = RefreshStatus(source, started_at=self._clock())
            with self._lock:
                self._status[source] = status
            try:
                self._refresh(source, connector, force, status, progress)
            except DataError as exc:
                status.state, status.error = "failed", f"{exc.code}: {exc.message}"
                raise
            except BaseException as exc:
                status.state, status.error = "failed", repr(exc)
                raise
            finally:
                status.finished_at = self._clock()
            if status.state == "running":
                status.state = "done"
            if progress is not None:
                progress(status)
            return status

    def start_refresh(self, source: str, *, force: bool = False) -> RefreshStatus:
        """Starts a refresh in the background (unless one runs) and returns its status."""
        self.catalog.source(source)  # source_not_found now, not in the background
        with self._lock:
            running = self._status.get(source)
            if running is not None and running.state == "running":
                return running
            status = RefreshStatus(source, started_at=self._clock())
            self._status[source] = status  # what `status` shows until the refresh starts

        def run() -> None:
            try:
                self.refresh(source, force=force)
            except BaseException as exc:  # the status says what failed
                log.warning("catalogue: refreshing source %s failed: %s", source, exc)

        self._background.submit(run)
        return status

    def status(self, source: str) -> RefreshStatus | None:
        """The latest refresh of the source in this process (None: none yet)."""
        with self._lock:
            return self._status.get(source)

    def forget(self, source: str) -> None:
        """Drops what is stored of a source (it was replaced or removed)."""
        with self._lock:
            self._stored.pop(source, None)
        path = self._path(source)
        if path is not None:
            for each in (path, path.with_suffix(".npy")):
                with contextlib.suppress(FileNotFoundError):
                    each.unlink()

    def close(self) -> None:
        """Stops the worker: queued refreshes are dropped, a running one stops at its next
        table without storing anything (a server's graceful shutdown does not wait for a
        10,000-table read)."""
        self._closing.set()
        self._background.shutdown(wait=False, cancel_futures=True)

    def _refresh(
        self,
        source: str,
        connector: Connector,
        force: bool,
        status: RefreshStatus,
        progress: Callable[[RefreshStatus], None] | None,
    ) -> None:
        fingerprint = _fingerprint(connector)
        with self._lock:
            previous = self._stored.get(source)
        if previous is None:
            previous = self._load(source)
        old = previous.entries if previous and previous.fingerprint == fingerprint else {}
        self.catalog.refresh(source)  # list the source anew, not from the metadata cache
        refs = self.catalog.table_refs(source)
        status.tables = len(refs)
        now = self._clock()
        ttl = self.ttl_of(source)
        entries: dict[str, TableEntry] = {}
        for ref in refs:
            if self._closing.is_set():
                status.state = "cancelled"  # the server stops: nothing half-done is stored
                return
            name = str(ref)
            before = old.get(name)
            try:
                stamp = connector.table_stamp(ref.schema, ref.table)
            except DataError:
                stamp = None
            if not force and before is not None and _unchanged(before, stamp, now, ttl):
                entries[name] = before
                status.kept += 1
            else:
                try:
                    entries[name] = self._read(connector, ref, stamp, now)
                    status.read += 1
                except DataError as exc:
                    status.failed[name] = f"{exc.code}: {exc.message}"
                    if before is not None:
                        entries[name] = before
            status.done += 1
            if progress is not None and status.done % PROGRESS_EVERY == 0:
                progress(status)
        status.dropped = len(set(old) - set(entries))
        try:
            current = self.catalog.source(source)
        except DataError:
            current = None
        if current is not connector:
            status.state = "cancelled"  # replaced or removed meanwhile: what was read is old
            return
        stored = _Stored(fingerprint, now, entries, _SourceIndex(list(entries.values())))
        if self._embed is not None:
            kept = previous.vector_of() if previous and previous.embedder == self._embedder else {}
            # Only what was read again (or never embedded) is embedded again.
            stale = {
                name for name in entries if name not in kept or entries[name] is not old.get(name)
            }
            stored.vectors = self._vectors(stored.index.entries, kept, stale)
            stored.embedder = self._embedder
        self._save(source, stored)
        with self._lock:
            self._stored[source] = stored

    def _vectors(
        self, entries: list[TableEntry], kept: dict[str, Vectors], stale: set[str]
    ) -> Vectors:
        """A unit row per entry: kept ones reused, the ``stale`` ones embedded in batches."""
        assert self._embed is not None
        todo = [entry for entry in entries if entry.name in stale]
        made: dict[str, Vectors] = {}
        for start in range(0, len(todo), EMBED_BATCH):
            batch = todo[start : start + EMBED_BATCH]
            rows = _unit(self._embed([entry.text() for entry in batch]))
            made.update((entry.name, rows[i]) for i, entry in enumerate(batch))
        if not entries:
            return np.zeros((0, 0), dtype=np.float32)
        rows_of = [made[e.name] if e.name in made else kept[e.name] for e in entries]
        return np.ascontiguousarray(np.stack(rows_of), dtype=np.float32)

    def ttl_of(self, source: str) -> float:
        """The source's TTL: its own when it has one, else the options'."""
        own = self._ttls(source) if self._ttls is not None else None
        return self.options.ttl_s if own is None else own

    def _read(
        self, connector: Connector, ref: TableRef, stamp: str | None, now: float
    ) -> TableEntry:
        info = connector.table_info(ref.schema, ref.table)
        values = self._values(connector, info) if self.options.sample_rows else {}
        return TableEntry(
            name=str(ref),
            source=ref.source,
            schema=ref.schema,
            table=ref.table,
            columns=[(c.name, c.source_type, c.comment) for c in info.columns],
            comment=info.comment,
            row_estimate=info.row_estimate,
            primary_key=list(info.primary_key),
            references=[
                str(TableRef(ref.source, key.ref_schema, key.ref_table))
                for key in info.foreign_keys
            ],
            values=values,
            stamp=stamp,
            read_at=now,
        )

    def _values(self, connector: Connector, info: TableInfo) -> dict[str, list[str]]:
        """Distinct values of each column among the first ``sample_rows`` rows of the
        table's first split. A small table is read to its end: a database connection left
        in the middle of a read is closed, not pooled, and opening one per table (tens of
        milliseconds) was most of a refresh's time; past DRAIN_ROWS the read is cut."""
        names = [column.name for column in info.columns]
        splits = connector.splits(info.schema, info.name, names)
        if not splits:
            return {}
        batches = connector.read(splits[0])
        kept: list[pa.RecordBatch] = []
        drained = wanted = 0
        try:
            for batch in batches:
                if wanted < self.options.sample_rows:
                    kept.append(batch)
                    wanted += batch.num_rows
                drained += batch.num_rows
                if drained >= DRAIN_ROWS:
                    break
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()
        if not kept:
            return {}
        table = pa.Table.from_batches(kept).slice(0, self.options.sample_rows)
        values: dict[str, list[str]] = {}
        for name in table.column_names:
            seen: list[str] = []
            for value in table.column(name).to_pylist():
                text = str(value)[:MAX_VALUE_CHARS]
                if value is not None and text not in seen:
                    seen.append(text)
                    if len(seen) == self.options.max_values:
                        break
            values[name] = seen
        return values

    def _source_lock(self, source: str) -> threading.Lock:
        with self._lock:
            return self._source_locks.setdefault(source, threading.Lock())

    # -- the files ---------------------------------------------------------------------------

    def _path(self, source: str) -> Path | None:
        # Source names are lower-case SQL identifiers (check_source_name): safe file names.
        return None if self.options.folder is None else self.options.folder / f"{source}.json"

    def _save(self, source: str, stored: _Stored) -> None:
        path = self._path(source)
        if path is None:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        vectors: dict[str, Any] | None = None
        if stored.vectors is not None:
            # The vectors first: the JSON names their digest, so a JSON never trusts a
            # matrix it was not written with (a crash between the two renames included).
            matrix = stored.vectors
            data = matrix.tobytes()
            _write_aside(path.with_suffix(".npy"), lambda out: np.save(out, matrix))
            vectors = {"embedder": stored.embedder, "digest": hashlib.sha256(data).hexdigest()}
        document = {
            "version": FORMAT_VERSION,
            "source": source,
            "fingerprint": stored.fingerprint,
            "checked_at": stored.checked_at,
            # In index order: the vectors' rows are the entries' in this order.
            "entries": [asdict(entry) for entry in stored.index.entries],
            "vectors": vectors,
        }
        _write_aside(path, lambda out: out.write(json.dumps(document).encode()))

    def _load(self, source: str) -> _Stored | None:
        path = self._path(source)
        if path is None or not path.is_file():
            return None
        try:
            document = json.loads(path.read_text(encoding="utf-8"))
            if document.get("version") != FORMAT_VERSION or document.get("source") != source:
                return None
            fingerprint = _fingerprint(self.catalog.source(source))
            if document["fingerprint"] != fingerprint:
                return None  # written for another configuration of the source
            entries = {}
            for item in document["entries"]:
                item["columns"] = [tuple(column) for column in item["columns"]]
                entry = TableEntry(**item)
                entries[entry.name] = entry
            checked_at = float(document["checked_at"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("catalogue: ignoring unreadable %s: %s", path, exc)
            return None
        stored = _Stored(fingerprint, checked_at, entries, _SourceIndex(list(entries.values())))
        recorded = document.get("vectors")
        usable = isinstance(recorded, dict) and recorded.get("embedder") == self._embedder
        if self._embedder is not None and usable:
            stored.vectors = _load_vectors(path.with_suffix(".npy"), recorded, len(entries))
            stored.embedder = self._embedder if stored.vectors is not None else None
        return stored


def _fingerprint(connector: Connector) -> str:
    """What identifies the source's configuration (its kind and settings, which hold no
    secrets: those are named, not given)."""
    config = getattr(connector, "config", None)
    if isinstance(config, BaseModel):
        dumped = config.model_dump_json()
    else:  # SQLite keeps its path only
        dumped = repr(getattr(connector, "path", None))
    return hashlib.sha256(f"{connector.kind}\n{dumped}".encode()).hexdigest()[:32]


def _unit(rows: Vectors | list[list[float]]) -> Vectors:
    """Rows scaled to unit length (a zero row stays zero): cosine is then a dot product."""
    matrix = np.asarray(rows, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    unit: Vectors = (matrix / np.where(norms == 0, 1, norms)).astype(np.float32)
    return unit


def _write_aside(path: Path, write: Callable[[Any], object]) -> None:
    """Writes ``path`` aside and renames it: a reader sees the old file or the new, never
    half. Private to the owner: sample values (and what they embed) are the sources' data."""
    handle, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            write(out)
        os.chmod(staging, 0o600)
        os.replace(staging, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(staging)
        raise


def _load_vectors(path: Path, recorded: dict[str, Any], rows: int) -> Vectors | None:
    """The stored matrix if it is the one the JSON recorded (digest) with a row per entry."""
    try:
        matrix = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        log.warning("catalogue: ignoring unreadable %s: %s", path, exc)
        return None
    if matrix.dtype != np.float32 or matrix.ndim != 2 or matrix.shape[0] != rows:
        return None
    if hashlib.sha256(matrix.tobytes()).hexdigest() != recorded.get("digest"):
        return None
    loaded: Vectors = np.ascontiguousarray(matrix)
    return loaded


def _unchanged(before: TableEntry, stamp: str | None, now: float, ttl: float) -> bool:
    """Whether a stored entry still holds: its stamp is the table's now, or (no stamp) it
    is younger than the source's TTL."""
    if stamp is not None:
        return before.stamp == stamp
    return before.stamp is None and now - before.read_at < ttl
