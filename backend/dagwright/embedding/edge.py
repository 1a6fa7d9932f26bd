"""Qdrant Edge (qdrant-edge-py, the engine in-process) behind the part of QdrantClient's
interface that ExampleStore uses.

One EdgeShard per collection, in `<path>/<collection name>/`. Results come back as
qdrant_client.models objects, so ExampleStore reads them as it reads a server's.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import qdrant_edge as edge
from qdrant_client.http import models

# qdrant-edge 0.9.0: MatchValue(True/False) compares with the integers 1/0 and finds nothing,
# so boolean conditions are checked here, on over-fetched candidates.
BOOL_OVERFETCH = 10
BOOL_MIN_FETCH = 100

_DISTANCES = {
    models.Distance.COSINE: edge.Distance.Cosine,
    models.Distance.DOT: edge.Distance.Dot,
    models.Distance.EUCLID: edge.Distance.Euclid,
    models.Distance.MANHATTAN: edge.Distance.Manhattan,
}


class ShardLockedError(RuntimeError):
    """The collection's folder is held by another process or handle."""


def _point_id(value: Any) -> models.ExtendedPointId:
    return value if isinstance(value, int) else str(value)


class EdgeClient:
    """The subset of QdrantClient that ExampleStore calls, on Qdrant Edge shards.

    Not thread-safe on its own: ExampleStore serialises calls with its lock."""

    def __init__(self, path: str | Path) -> None:
        self._path = Path(path)
        self._path.mkdir(parents=True, exist_ok=True)
        self._shards: dict[str, edge.EdgeShard] = {}
        self._indexed: dict[str, set[str]] = {}
        self._guard = threading.RLock()
        # Open every collection now: a folder another process holds is reported at once.
        try:
            for folder in sorted(self._path.iterdir()):
                if folder.is_dir():
                    self._shard(folder.name)
        except BaseException:
            self.close()
            raise

    # -- shards -----------------------------------------------------------------------------

    def _folder(self, collection_name: str) -> Path:
        if not collection_name or "/" in collection_name or collection_name in {".", ".."}:
            raise ValueError(f"invalid collection name {collection_name!r}")
        return self._path / collection_name

    def _shard(self, collection_name: str) -> edge.EdgeShard:
        with self._guard:
            shard = self._shards.get(collection_name)
            if shard is None:
                folder = self._folder(collection_name)
                if not folder.is_dir():
                    raise ValueError(f"Collection {collection_name} not found")
                shard = _call(lambda: edge.EdgeShard.load(str(folder)), folder)
                self._shards[collection_name] = shard
                self._indexed[collection_name] = set()
            return shard

    def collection_exists(self, collection_name: str) -> bool:
        return self._folder(collection_name).is_dir()

    def create_collection(
        self, collection_name: str, vectors_config: models.VectorParams, **_: Any
    ) -> bool:
        folder = self._folder(collection_name)
        if folder.exists():
            raise ValueError(f"Collection {collection_name} already exists")
        config = edge.EdgeConfig(
            vectors=edge.EdgeVectorParams(
                size=vectors_config.size, distance=_DISTANCES[vectors_config.distance]
            )
        )
        with self._guard:
            shard = _call(lambda: edge.EdgeShard.create(str(folder), config), folder)
            self._shards[collection_name] = shard
            self._indexed[collection_name] = set()
        return True

    def delete_collection(self, collection_name: str, **_: Any) -> bool:
        folder = self._folder(collection_name)
        with self._guard:
            shard = self._shards.pop(collection_name, None)
            self._indexed.pop(collection_name, None)
            if shard is not None:
                shard.close()
            if not folder.exists():
                return False
            shutil.rmtree(folder)
        return True

    def close(self, **_: Any) -> None:
        with self._guard:
            shards, self._shards = self._shards, {}
            self._indexed.clear()
            for shard in shards.values():
                shard.flush()
                shard.close()

    # -- points -----------------------------------------------------------------------------

    def upsert(
        self, collection_name: str, points: Sequence[models.PointStruct], **_: Any
    ) -> models.UpdateResult:
        shard = self._shard(collection_name)
        converted = []
        for point in points:
            if not isinstance(point.vector, list) or not all(
                isinstance(x, int | float) for x in point.vector
            ):
                raise TypeError("EdgeClient stores one unnamed dense vector per point")
            vector = [float(x) for x in point.vector]  # type: ignore[arg-type]
            converted.append(edge.Point(point.id, vector, dict(point.payload or {})))
        shard.update(edge.UpdateOperation.upsert_points(converted))
        shard.flush()
        return models.UpdateResult(operation_id=None, status=models.UpdateStatus.COMPLETED)

    def delete(
        self,
        collection_name: str,
        points_selector: models.PointIdsList | Sequence[models.ExtendedPointId],
        **_: Any,
    ) -> models.UpdateResult:
        ids = (
            points_selector.points
            if isinstance(points_selector, models.PointIdsList)
            else list(points_selector)
        )
        shard = self._shard(collection_name)
        shard.update(edge.UpdateOperation.delete_points(list(ids)))
        shard.flush()
        return models.UpdateResult(operation_id=None, status=models.UpdateStatus.COMPLETED)

    def retrieve(
        self,
        collection_name: str,
        ids: Sequence[models.ExtendedPointId],
        with_payload: bool = True,
        with_vectors: bool = False,
        **_: Any,
    ) -> list[models.Record]:
        records = self._shard(collection_name).retrieve(list(ids), with_payload, with_vectors)
        return [_record(r, with_payload, with_vectors) for r in records]

    def scroll(
        self,
        collection_name: str,
        scroll_filter: models.Filter | None = None,
        limit: int = 10,
        offset: models.ExtendedPointId | None = None,
        with_payload: bool = True,
        with_vectors: bool = False,
        **_: Any,
    ) -> tuple[list[models.Record], models.ExtendedPointId | None]:
        shard = self._shard(collection_name)
        native, checks = self._convert_filter(collection_name, shard, scroll_filter)
        if checks:
            raise NotImplementedError("EdgeClient.scroll: boolean filters are not supported")
        records, next_offset = shard.scroll(
            edge.ScrollRequest(
                offset=offset,
                limit=limit,
                filter=native,
                with_payload=with_payload,
                with_vector=with_vectors,
            )
        )
        return (
            [_record(r, with_payload, with_vectors) for r in records],
            None if next_offset is None else _point_id(next_offset),
        )

    def count(
        self,
        collection_name: str,
        count_filter: models.Filter | None = None,
        exact: bool = True,
        **_: Any,
    ) -> models.CountResult:
        shard = self._shard(collection_name)
        native, checks = self._convert_filter(collection_name, shard, count_filter)
        if checks:
            raise NotImplementedError("EdgeClient.count: boolean filters are not supported")
        return models.CountResult(count=shard.count(edge.CountRequest(exact=exact, filter=native)))

    def query_points(
        self,
        collection_name: str,
        query: Sequence[float],
        query_filter: models.Filter | None = None,
        limit: int = 10,
        score_threshold: float | None = None,
        with_payload: bool = True,
        with_vectors: bool = False,
        **_: Any,
    ) -> models.QueryResponse:
        shard = self._shard(collection_name)
        native, checks = self._convert_filter(collection_name, shard, query_filter)
        fetch = max(limit * BOOL_OVERFETCH, BOOL_MIN_FETCH) if checks else limit
        hits = shard.query(
            edge.QueryRequest(
                limit=fetch,
                query=edge.Query.Nearest([float(x) for x in query]),
                filter=native,
                score_threshold=score_threshold,
                # The boolean checks read the payload even when the caller does not want it.
                with_payload=with_payload or bool(checks),
                with_vector=with_vectors,
            )
        )
        points: list[models.ScoredPoint] = []
        for hit in hits:
            payload = hit.payload or {}
            if not all(_same_bool(payload.get(key), value) for key, value in checks):
                continue
            points.append(
                models.ScoredPoint(
                    id=_point_id(hit.id),
                    version=hit.version,
                    score=hit.score,
                    payload=dict(payload) if with_payload else None,
                    vector=_vector(hit.vector) if with_vectors else None,
                )
            )
            if len(points) == limit:
                break
        return models.QueryResponse(points=points)

    # -- filters ----------------------------------------------------------------------------

    def _convert_filter(
        self, collection_name: str, shard: edge.EdgeShard, query_filter: models.Filter | None
    ) -> tuple[edge.Filter | None, list[tuple[str, bool]]]:
        """The engine's filter for the conditions it handles, and the boolean matches that
        must be checked here. Supports `must` of FieldCondition with MatchValue only."""
        if query_filter is None:
            return None, []
        if query_filter.should or query_filter.must_not or query_filter.min_should:
            raise NotImplementedError("EdgeClient supports filters with `must` only")
        must = query_filter.must
        conditions = must if isinstance(must, list) else ([] if must is None else [must])
        native: list[edge.FieldCondition] = []
        checks: list[tuple[str, bool]] = []
        for condition in conditions:
            if not isinstance(condition, models.FieldCondition) or not isinstance(
                condition.match, models.MatchValue
            ):
                raise NotImplementedError("EdgeClient supports FieldCondition(MatchValue) only")
            value = condition.match.value
            if isinstance(value, bool):
                checks.append((condition.key, value))
                continue
            self._ensure_index(collection_name, shard, condition.key, value)
            native.append(edge.FieldCondition(key=condition.key, match=edge.MatchValue(value)))
        return (edge.Filter(must=list(native)) if native else None), checks

    def _ensure_index(
        self, collection_name: str, shard: edge.EdgeShard, key: str, value: str | int
    ) -> None:
        indexed = self._indexed.setdefault(collection_name, set())
        if key in indexed:
            return
        schema = (
            edge.PayloadSchemaType.Integer
            if isinstance(value, int)
            else edge.PayloadSchemaType.Keyword
        )
        shard.update(edge.UpdateOperation.create_field_index(key, schema))
        shard.flush()
        indexed.add(key)


def _same_bool(found: Any, wanted: bool) -> bool:
    if isinstance(found, list):  # Qdrant matches any element of an array
        return any(_same_bool(item, wanted) for item in found)
    return isinstance(found, bool) and found is wanted


def _vector(value: Any) -> list[float] | None:
    return None if value is None else [float(x) for x in value]


def _record(record: edge.Record, with_payload: bool, with_vectors: bool) -> models.Record:
    return models.Record(
        id=_point_id(record.id),
        payload=dict(record.payload or {}) if with_payload else None,
        vector=_vector(record.vector) if with_vectors else None,
    )


def _call(open_shard: Callable[[], edge.EdgeShard], folder: Path) -> edge.EdgeShard:
    try:
        shard = open_shard()
    except Exception as exc:
        if "WouldBlock" in str(exc):
            raise ShardLockedError(f"{folder} is held by another process: {exc}") from None
        raise
    return shard
