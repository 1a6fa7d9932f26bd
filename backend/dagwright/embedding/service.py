"""The example store: few-shot examples kept in namespaces on Qdrant, found by meaning.

A namespace is a Qdrant collection `dw_<name>` (cosine distance, the dimension of its
embedder). Its settings (embedder spec, dimension, key fields, text field and the payload
fields seen so far) live in a registry collection, `dw__namespaces`, so they survive a restart
and are shared by every process using the same Qdrant server; a namespace name cannot start
with `_`, so the registry never clashes with a namespace.

Point ids are a UUID5 of the namespace and the example's key values: upserting the same
example again (or a changed one with the same key) writes the same point.
"""

from __future__ import annotations

import asyncio
import csv
import importlib.util
import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from qdrant_client import QdrantClient, models
else:
    # qdrant-client takes over a second to import: a server that never touches examples
    # (and every server start) should not pay it. Its models load on first use.
    class _LazyModels:
        def __getattr__(self, name: str) -> Any:
            from qdrant_client import models as loaded

            return getattr(loaded, name)

    models = _LazyModels()

from dagwright.embedding.embedder import Embedder
from dagwright.errors import ConflictError, DagwrightError, InputError, NotFoundError

NAMESPACE_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
COLLECTION_PREFIX = "dw_"
REGISTRY = "dw__namespaces"
MAX_PAYLOAD_BYTES = 64 * 1024
MAX_K = 1000
MAX_PAGE = 1000
# Fixed, so ids are the same in every process and after a restart.
_ID_NAMESPACE = uuid.UUID("6f1d3a52-8a7e-4f4b-9a57-0d6c2f4e9b31")

EmbedderFactory = Callable[[str], Embedder]
Progress = Callable[[int, int], None]


class ExampleInputError(InputError):
    """Bad input to the example store (422), with a specific code per case."""

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message)
        self.code = code


class DimensionMismatchError(ExampleInputError):
    def __init__(self, message: str) -> None:
        super().__init__(message, "dimension_mismatch")


class StoreLockedError(DagwrightError):
    """The local store's folder is held by another process (Qdrant local mode locks it)."""

    code = "example_store_locked"


@dataclass(slots=True)
class Namespace:
    name: str
    embedder: str
    dimension: int
    key_fields: list[str]
    text_field: str
    fields: list[str] = field(default_factory=list)  # payload fields seen, for filter checks

    def to_payload(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "embedder": self.embedder,
            "dimension": self.dimension,
            "key_fields": list(self.key_fields),
            "text_field": self.text_field,
            "fields": list(self.fields),
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> Namespace:
        return cls(
            name=str(payload["name"]),
            embedder=str(payload["embedder"]),
            dimension=int(payload["dimension"]),
            key_fields=[str(f) for f in payload["key_fields"]],
            text_field=str(payload["text_field"]),
            fields=[str(f) for f in payload.get("fields", [])],
        )


@dataclass(slots=True, frozen=True)
class Hit:
    id: str
    score: float
    payload: dict[str, Any]


@dataclass(slots=True, frozen=True)
class CursorPage:
    """One page of a namespace's examples in Qdrant's scroll order: not a store.paging.Page,
    which counts and skips rows; the next page starts at `next_offset`, a point id."""

    items: list[Hit]  # score is 0.0: a listing has no query
    next_offset: str | None


@dataclass(slots=True, frozen=True)
class _Prepared:
    id: str
    text: str
    payload: dict[str, Any]


def check_namespace_name(name: str) -> None:
    if not NAMESPACE_PATTERN.match(name):
        raise ExampleInputError(
            f"namespace {name!r} is not a valid name: lowercase letters, digits, '_' and '-', "
            "starting with a letter or digit, at most 63 characters",
            "invalid_namespace",
        )


def example_id(namespace: str, key_values: Sequence[Any]) -> str:
    """The point id of an example: stable across processes, restarts and payload changes."""
    key = json.dumps([namespace, *key_values], sort_keys=True, ensure_ascii=False)
    return str(uuid.uuid5(_ID_NAMESPACE, key))


def _registry_id(name: str) -> str:
    return str(uuid.uuid5(_ID_NAMESPACE, f"namespace:{name}"))


def _collection(name: str) -> str:
    return COLLECTION_PREFIX + name


def default_local_engine() -> str:
    """ "edge" when qdrant-edge-py is installed, else "client" (looked up, not imported:
    a server start builds the store without opening it)."""
    return "edge" if importlib.util.find_spec("qdrant_edge") is not None else "client"


class ExampleStore:
    """Namespaces of examples on one Qdrant (local folder or server)."""

    def __init__(
        self, client: QdrantClient | Callable[[], QdrantClient], embedders: EmbedderFactory
    ) -> None:
        # A client, or how to open one on first use: a server process that never touches
        # examples must not take the local folder, which only one process may hold.
        self._connect = client if callable(client) else (lambda: client)
        self._client: QdrantClient | None = None
        self._embedders = embedders
        self._embedder_cache: dict[str, Embedder] = {}
        # Local mode is a plain Python object over SQLite, not safe across threads; a server
        # client is, but one lock keeps the registry's read-modify-write of `fields` atomic.
        self._lock = threading.RLock()

    @property
    def client(self) -> QdrantClient:
        with self._lock:
            if self._client is None:
                client = self._connect()
                if not client.collection_exists(REGISTRY):
                    client.create_collection(
                        REGISTRY,
                        vectors_config=models.VectorParams(size=1, distance=models.Distance.DOT),
                    )
                self._client = client
            return self._client

    @classmethod
    def local(
        cls,
        path: Path,
        embedders: EmbedderFactory,
        lazy: bool = False,
        engine: str | None = None,
    ) -> ExampleStore:
        """engine "edge" runs Qdrant Edge (qdrant-edge-py) in-process, "client"
        qdrant-client's local mode; by default edge when it is installed."""
        engine = engine or default_local_engine()
        if engine not in ("edge", "client"):
            raise ValueError(f"engine must be 'edge' or 'client', not {engine!r}")

        def locked() -> StoreLockedError:
            return StoreLockedError(
                f"the example store at {path} is used by another process; local mode "
                "allows one process per folder — run a Qdrant server and set "
                "DAGWRIGHT_QDRANT_URL to share it"
            )

        def connect() -> QdrantClient:
            path.mkdir(parents=True, exist_ok=True)
            if engine == "edge":
                from dagwright.embedding.edge import EdgeClient, ShardLockedError

                try:
                    # Duck-typed: the subset of QdrantClient that this class calls.
                    return cast("QdrantClient", EdgeClient(path))
                except ShardLockedError:
                    raise locked() from None
            from qdrant_client import QdrantClient

            try:
                # Our lock serialises access, so SQLite's same-thread check only gets in the
                # way of asyncio.to_thread.
                return QdrantClient(path=str(path), force_disable_check_same_thread=True)
            except RuntimeError as exc:
                if "already accessed" not in str(exc):
                    raise
                raise locked() from None

        store = cls(connect, embedders)
        if not lazy:
            _ = store.client  # open now: a locked folder is reported at once
        return store

    @classmethod
    def remote(
        cls, url: str, embedders: EmbedderFactory, *, api_key: str | None = None
    ) -> ExampleStore:
        from qdrant_client import QdrantClient

        return cls(QdrantClient(url=url, api_key=api_key), embedders)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    @contextmanager
    def _locked(self) -> Iterator[QdrantClient]:
        with self._lock:
            yield self.client

    # -- namespaces ---------------------------------------------------------------------

    def create_namespace(
        self, name: str, embedder_spec: str, key_fields: list[str], text_field: str
    ) -> Namespace:
        check_namespace_name(name)
        if not key_fields or any(not f for f in key_fields):
            raise ExampleInputError("key_fields must name at least one field", "invalid_namespace")
        if not text_field:
            raise ExampleInputError("text_field must name a field", "invalid_namespace")
        embedder = self.embedder(embedder_spec)
        namespace = Namespace(
            name, embedder.spec, embedder.dimension, list(key_fields), text_field, []
        )
        with self._locked() as client:
            if self._find(name) is not None:
                raise ConflictError(f"namespace {name!r} exists", code="namespace_exists")
            client.create_collection(
                _collection(name),
                vectors_config=models.VectorParams(
                    size=embedder.dimension, distance=models.Distance.COSINE
                ),
            )
            self._save(namespace)
        return namespace

    def list_namespaces(self) -> list[Namespace]:
        found: list[Namespace] = []
        offset: Any = None
        with self._locked() as client:
            while True:
                points, offset = client.scroll(REGISTRY, limit=256, offset=offset)
                found.extend(Namespace.from_payload(p.payload or {}) for p in points)
                if offset is None:
                    break
        return sorted(found, key=lambda n: n.name)

    def get_namespace(self, name: str) -> Namespace:
        with self._lock:
            # Read each time, not cached: another replica may have created, deleted or
            # widened it (a local retrieve costs microseconds).
            found = self._find(name)
        if found is None:
            raise NotFoundError(f"no namespace {name!r}", code="namespace_not_found")
        return found

    def delete_namespace(self, name: str) -> None:
        self.get_namespace(name)
        with self._locked() as client:
            client.delete_collection(_collection(name))
            client.delete(
                REGISTRY, points_selector=models.PointIdsList(points=[_registry_id(name)])
            )

    def _find(self, name: str) -> Namespace | None:
        if not NAMESPACE_PATTERN.match(name):
            return None
        points = self.client.retrieve(REGISTRY, [_registry_id(name)], with_payload=True)
        if not points:
            return None
        namespace = Namespace.from_payload(points[0].payload or {})
        return namespace

    def _save(self, namespace: Namespace) -> None:
        point = models.PointStruct(
            id=_registry_id(namespace.name), vector=[1.0], payload=namespace.to_payload()
        )
        self.client.upsert(REGISTRY, [point])

    def embedder(self, spec: str) -> Embedder:
        if spec not in self._embedder_cache:
            self._embedder_cache[spec] = self._embedders(spec)
        return self._embedder_cache[spec]

    def _embedder_for(self, namespace: Namespace) -> Embedder:
        embedder = self.embedder(namespace.embedder)
        if embedder.dimension != namespace.dimension:
            raise DimensionMismatchError(
                f"namespace {namespace.name!r} holds {namespace.dimension}-dimension vectors "
                f"but its embedder {namespace.embedder!r} gives {embedder.dimension}"
            )
        return embedder

    # -- examples -----------------------------------------------------------------------

    def _prepare(self, namespace: Namespace, examples: list[dict[str, Any]]) -> list[_Prepared]:
        prepared: list[_Prepared] = []
        for index, example in enumerate(examples):
            if not isinstance(example, dict):
                raise ExampleInputError(f"example {index} is not an object", "invalid_example")
            missing = [f for f in namespace.key_fields if f not in example]
            if missing:
                raise ExampleInputError(
                    f"example {index} has no key field {missing[0]!r}", "missing_key_field"
                )
            text = example.get(namespace.text_field)
            if not isinstance(text, str) or not text.strip():
                raise ExampleInputError(
                    f"example {index}: the text field {namespace.text_field!r} is missing or empty",
                    "empty_text",
                )
            try:
                size = len(json.dumps(example, ensure_ascii=False).encode())
            except (TypeError, ValueError) as exc:
                raise ExampleInputError(
                    f"example {index} is not JSON: {exc}", "invalid_example"
                ) from None
            if size > MAX_PAYLOAD_BYTES:
                raise ExampleInputError(
                    f"example {index} is {size} bytes of JSON; the limit is {MAX_PAYLOAD_BYTES}",
                    "payload_too_large",
                )
            key_values = [example[f] for f in namespace.key_fields]
            prepared.append(_Prepared(example_id(namespace.name, key_values), text, example))
        return prepared

    def _write(
        self, namespace: Namespace, prepared: list[_Prepared], vectors: Sequence[Sequence[float]]
    ) -> list[str]:
        if len(vectors) != len(prepared):
            raise ExampleInputError(
                f"{len(vectors)} vectors for {len(prepared)} examples", "invalid_vectors"
            )
        for vector in vectors:
            self._check_dimension(namespace, len(vector))
        points = [
            models.PointStruct(id=p.id, vector=list(v), payload=p.payload)
            for p, v in zip(prepared, vectors, strict=True)
        ]
        with self._locked() as client:
            if points:
                client.upsert(_collection(namespace.name), points)
            seen = {key for p in prepared for key in p.payload}
            current = self._find(namespace.name) or namespace
            if not seen.issubset(current.fields):
                current.fields = sorted(seen.union(current.fields))
                self._save(current)
        return [p.id for p in prepared]

    def _check_dimension(self, namespace: Namespace, size: int) -> None:
        if size != namespace.dimension:
            raise DimensionMismatchError(
                f"namespace {namespace.name!r} holds {namespace.dimension}-dimension vectors; "
                f"got a vector of {size}"
            )

    async def upsert(self, namespace: str, examples: list[dict[str, Any]]) -> list[str]:
        """Embed and store examples (one embed call for the batch); returns their ids."""
        ns = self.get_namespace(namespace)
        embedder = self._embedder_for(ns)
        prepared = self._prepare(ns, examples)
        if not prepared:
            return []
        vectors = await embedder.embed([p.text for p in prepared])
        return await asyncio.to_thread(self._write, ns, prepared, vectors)

    def upsert_vectors(
        self,
        namespace: str,
        examples: list[dict[str, Any]],
        vectors: Sequence[Sequence[float]],
    ) -> list[str]:
        """Store examples with vectors computed elsewhere (benchmarks, imports)."""
        ns = self.get_namespace(namespace)
        return self._write(ns, self._prepare(ns, examples), vectors)

    def _filter(self, ns: Namespace, where: dict[str, Any] | None) -> models.Filter | None:
        if not where:
            return None
        conditions: list[models.Condition] = []
        for key, value in where.items():
            if key not in ns.fields:
                raise ExampleInputError(
                    f"no example in namespace {ns.name!r} has a field {key!r} to filter on",
                    "unknown_filter_field",
                )
            # MatchValue takes exact strings, integers and booleans; floats never match
            # reliably, so they are refused rather than silently finding nothing.
            if not isinstance(value, str | int | bool):
                raise ExampleInputError(
                    f"filter {key!r}: only strings, integers and booleans match exactly",
                    "invalid_filter",
                )
            conditions.append(models.FieldCondition(key=key, match=models.MatchValue(value=value)))
        return models.Filter(must=conditions)

    async def query(
        self,
        namespace: str,
        text: str,
        k: int = 5,
        filter: dict[str, Any] | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """The k examples nearest to text, best first."""
        ns = self.get_namespace(namespace)
        if not text.strip():
            raise ExampleInputError("the query text is empty", "empty_text")
        self._check_query(ns, k, filter)
        embedder = self._embedder_for(ns)
        [vector] = await embedder.embed([text])
        return await asyncio.to_thread(self.query_vector, namespace, vector, k, filter, min_score)

    def _check_query(self, ns: Namespace, k: int, where: dict[str, Any] | None) -> None:
        if not 1 <= k <= MAX_K:
            raise ExampleInputError(f"k must be between 1 and {MAX_K}, not {k}", "invalid_k")
        self._filter(ns, where)

    def query_vector(
        self,
        namespace: str,
        vector: Sequence[float],
        k: int = 5,
        filter: dict[str, Any] | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """The k examples nearest to a vector, best first (no embedding)."""
        ns = self.get_namespace(namespace)
        self._check_dimension(ns, len(vector))
        if not 1 <= k <= MAX_K:
            raise ExampleInputError(f"k must be between 1 and {MAX_K}, not {k}", "invalid_k")
        query_filter = self._filter(ns, filter)
        with self._locked() as client:
            result = client.query_points(
                _collection(namespace),
                query=list(vector),
                limit=k,
                query_filter=query_filter,
                score_threshold=min_score,
                with_payload=True,
            )
        return [Hit(str(p.id), float(p.score), dict(p.payload or {})) for p in result.points]

    def delete(self, namespace: str, ids: list[str]) -> int:
        """Delete examples by id; returns how many existed."""
        self.get_namespace(namespace)
        for id_ in ids:
            _check_id(id_)
        with self._locked() as client:
            existing = client.retrieve(
                _collection(namespace), ids, with_payload=False, with_vectors=False
            )
            if existing:
                client.delete(
                    _collection(namespace),
                    points_selector=models.PointIdsList(points=[p.id for p in existing]),
                )
        return len(existing)

    def count(self, namespace: str) -> int:
        self.get_namespace(namespace)
        with self._locked() as client:
            return client.count(_collection(namespace), exact=True).count

    async def load_file(
        self,
        namespace: str,
        path: Path,
        batch_size: int = 256,
        progress: Progress | None = None,
    ) -> int:
        """Upsert every row of a JSONL or CSV file, batch by batch; returns how many."""
        self.get_namespace(namespace)
        rows = read_examples(path)
        done = 0
        if progress is not None:
            progress(0, len(rows))
        for start in range(0, len(rows), batch_size):
            batch = rows[start : start + batch_size]
            try:
                await self.upsert(namespace, batch)
            except ExampleInputError as exc:
                # Name the row in the file, not the index within the batch.
                raise ExampleInputError(
                    f"{path.name}, from row {start + 1}: {exc.message}", exc.code
                ) from None
            done += len(batch)
            if progress is not None:
                progress(done, len(rows))
        return done

    def list(self, namespace: str, offset: str | None = None, limit: int = 100) -> CursorPage:
        """One page of examples in id order; pass `next_offset` back for the next page."""
        self.get_namespace(namespace)
        if not 1 <= limit <= MAX_PAGE:
            raise ExampleInputError(
                f"limit must be between 1 and {MAX_PAGE}, not {limit}", "invalid_limit"
            )
        if offset is not None:
            _check_id(offset)
        with self._locked() as client:
            points, next_offset = client.scroll(
                _collection(namespace), limit=limit, offset=offset, with_payload=True
            )
        items = [Hit(str(p.id), 0.0, dict(p.payload or {})) for p in points]
        return CursorPage(items, None if next_offset is None else str(next_offset))


def _check_id(id_: str) -> None:
    try:
        uuid.UUID(id_)
    except ValueError:
        raise NotFoundError(f"no example {id_!r}", code="example_not_found") from None


def read_examples(path: Path) -> list[dict[str, Any]]:
    """The rows of a JSONL (.jsonl, .ndjson) or CSV (.csv, header row) file as examples."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".jsonl", ".ndjson"):
            return _read_jsonl(path)
        if suffix == ".csv":
            with path.open(newline="", encoding="utf-8") as handle:
                return [dict(row) for row in csv.DictReader(handle)]
    except OSError as exc:
        raise ExampleInputError(f"cannot read {path}: {exc.strerror}", "unreadable_file") from None
    raise ExampleInputError(
        f"{path.name}: expected a .jsonl, .ndjson or .csv file", "unsupported_file"
    )


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ExampleInputError(
                    f"{path.name}, line {number}: not JSON ({exc.msg})", "invalid_example"
                ) from None
            if not isinstance(row, dict):
                raise ExampleInputError(
                    f"{path.name}, line {number}: expected a JSON object", "invalid_example"
                )
            rows.append(row)
    return rows
