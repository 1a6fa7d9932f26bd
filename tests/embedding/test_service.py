"""The example store on Qdrant's local mode, with an embedder whose vectors are known."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dagwright.embedding.embedder import Embedder
from dagwright.embedding.service import (
    MAX_PAYLOAD_BYTES,
    DimensionMismatchError,
    ExampleInputError,
    ExampleStore,
    StoreLockedError,
    example_id,
    read_examples,
)
from dagwright.errors import ConflictError, DagwrightError, InputError, NotFoundError


class LetterEmbedder(Embedder):
    """Counts of the letters a, b, c, d, then 1.0 when none occurs (so no vector is zero):
    cosine scores can be worked out by hand."""

    def __init__(self, dimension: int = 5) -> None:
        self.spec = f"letters:{dimension}"
        self.dimension = dimension
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        vectors = []
        for text in texts:
            counts = [float(text.count(c)) for c in "abcd"]
            vector = [*counts, 0.0 if any(counts) else 1.0]
            vectors.append((vector + [0.0] * self.dimension)[: self.dimension])
        return vectors


class Factory:
    def __init__(self, dimension: int = 5) -> None:
        self.dimension = dimension
        self.made: list[LetterEmbedder] = []

    def __call__(self, spec: str) -> Embedder:
        embedder = LetterEmbedder(self.dimension)
        self.made.append(embedder)
        return embedder


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture(params=["edge", "client"])
def store(tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    opened = ExampleStore.local(tmp_path / "qdrant", Factory(), engine=request.param)
    opened.create_namespace("qa", "letters:5", ["id"], "question")
    yield opened
    opened.close()


def ex(id_: int, question: str, **more: Any) -> dict[str, Any]:
    return {"id": id_, "question": question, **more}


async def test_upsert_is_idempotent_and_replaces_changed_payloads(store: ExampleStore) -> None:
    first = await store.upsert("qa", [ex(1, "aaab", answer="x")])
    again = await store.upsert("qa", [ex(1, "aaab", answer="x")])
    assert first == again == [example_id("qa", [1])]
    assert store.count("qa") == 1

    await store.upsert("qa", [ex(1, "aaab", answer="changed")])
    assert store.count("qa") == 1
    [item] = store.list("qa").items
    assert item.payload == {"id": 1, "question": "aaab", "answer": "changed"}


async def test_one_embed_call_per_batch(tmp_path: Path) -> None:
    factory = Factory()
    store = ExampleStore.local(tmp_path / "q", factory)
    store.create_namespace("qa", "letters:5", ["id"], "question")
    await store.upsert("qa", [ex(i, "ab" * i) for i in range(1, 11)])
    [embedder] = factory.made
    assert len(embedder.calls) == 1
    assert len(embedder.calls[0]) == 10
    store.close()


async def test_ids_depend_on_namespace_and_every_key_field(store: ExampleStore) -> None:
    store.create_namespace("multi", "letters:5", ["dataset", "id"], "question")
    [a] = await store.upsert("multi", [{"dataset": "s", "id": 1, "question": "a"}])
    [b] = await store.upsert("multi", [{"dataset": "t", "id": 1, "question": "a"}])
    [c] = await store.upsert("qa", [ex(1, "a")])
    assert len({a, b, c}) == 3
    assert store.count("multi") == 2


async def test_namespaces_are_isolated(store: ExampleStore) -> None:
    store.create_namespace("other", "letters:5", ["id"], "question")
    await store.upsert("qa", [ex(1, "aaaa"), ex(2, "bbbb")])
    await store.upsert("other", [ex(1, "cccc")])
    assert (store.count("qa"), store.count("other")) == (2, 1)
    hits = await store.query("other", "aaaa", k=5)
    assert [h.payload["question"] for h in hits] == ["cccc"]
    assert [n.name for n in store.list_namespaces()] == ["other", "qa"]


async def test_top_k_order_and_scores(store: ExampleStore) -> None:
    await store.upsert(
        "qa", [ex(1, "abbb"), ex(2, "aaab"), ex(3, "aabb"), ex(4, "cccc"), ex(5, "dddd")]
    )
    hits = await store.query("qa", "a", k=3)
    assert [h.payload["id"] for h in hits] == [2, 3, 1]
    query = [1.0, 0, 0, 0, 0]
    expected = [cosine(query, v) for v in ([3, 1, 0, 0, 0], [2, 2, 0, 0, 0], [1, 3, 0, 0, 0])]
    assert [h.score for h in hits] == pytest.approx(expected, abs=1e-5)
    assert hits[0].score == pytest.approx(3 / math.sqrt(10), abs=1e-5)
    assert hits[0].id == example_id("qa", [2])


async def test_filter_and_min_score(store: ExampleStore) -> None:
    await store.upsert(
        "qa",
        [
            ex(1, "aaab", dataset="sales"),
            ex(2, "aaaa", dataset="hr"),
            ex(3, "aabb", dataset="sales"),
            ex(4, "abbb", dataset="sales", year=2024),
        ],
    )
    hits = await store.query("qa", "a", k=10, filter={"dataset": "sales"})
    assert [h.payload["id"] for h in hits] == [1, 3, 4]
    hits = await store.query("qa", "a", k=10, filter={"dataset": "sales"}, min_score=0.7)
    assert [h.payload["id"] for h in hits] == [1, 3]
    hits = await store.query("qa", "a", k=10, filter={"year": 2024})
    assert [h.payload["id"] for h in hits] == [4]
    assert await store.query("qa", "a", filter={"dataset": "none"}) == []


async def test_boolean_filter(store: ExampleStore) -> None:
    # qdrant-edge 0.9.0 matches True/False as 1/0: the edge facade checks booleans itself.
    await store.upsert(
        "qa",
        [
            ex(1, "aaab", done=True, level=1),
            ex(2, "aaaa", done=False, level=1),
            ex(3, "aabb", done=True, level=0),
            ex(4, "abbb", done=1),
        ],
    )
    hits = await store.query("qa", "a", k=10, filter={"done": True})
    assert [h.payload["id"] for h in hits] == [1, 3]
    hits = await store.query("qa", "a", k=1, filter={"done": True})
    assert [h.payload["id"] for h in hits] == [1]
    hits = await store.query("qa", "a", k=10, filter={"done": False})
    assert [h.payload["id"] for h in hits] == [2]
    hits = await store.query("qa", "a", k=10, filter={"done": True, "level": 0})
    assert [h.payload["id"] for h in hits] == [3]
    hits = await store.query("qa", "a", k=10, filter={"done": True}, min_score=0.8)
    assert [h.payload["id"] for h in hits] == [1]


async def test_unknown_filter_field_and_bad_filter_values(store: ExampleStore) -> None:
    await store.upsert("qa", [ex(1, "a", dataset="sales")])
    with pytest.raises(ExampleInputError) as caught:
        await store.query("qa", "a", filter={"region": "eu"})
    assert caught.value.code == "unknown_filter_field"
    assert "'region'" in caught.value.message
    with pytest.raises(ExampleInputError) as caught:
        await store.query("qa", "a", filter={"dataset": 1.5})
    assert caught.value.code == "invalid_filter"


async def test_delete(store: ExampleStore) -> None:
    ids = await store.upsert("qa", [ex(1, "a"), ex(2, "b"), ex(3, "c")])
    assert store.delete("qa", [ids[0], ids[2]]) == 2
    assert store.delete("qa", [ids[0]]) == 0  # already gone
    assert [item.id for item in store.list("qa").items] == [ids[1]]
    with pytest.raises(NotFoundError) as caught:
        store.delete("qa", ["not-a-uuid"])
    assert caught.value.code == "example_not_found"


async def test_count_and_list_paging(store: ExampleStore) -> None:
    ids = await store.upsert("qa", [ex(i, "a" * (i + 1)) for i in range(25)])
    seen: list[str] = []
    offset: str | None = None
    pages = 0
    while True:
        page = store.list("qa", offset=offset, limit=10)
        seen.extend(item.id for item in page.items)
        pages += 1
        if page.next_offset is None:
            break
        offset = page.next_offset
    assert pages == 3
    assert store.count("qa") == 25
    assert sorted(seen) == sorted(ids)
    assert len(seen) == 25


@pytest.mark.parametrize("engine", ["edge", "client"])
async def test_persistence_across_a_restart(tmp_path: Path, engine: str) -> None:
    path = tmp_path / "q"
    store = ExampleStore.local(path, Factory(), engine=engine)
    store.create_namespace("qa", "letters:5", ["id"], "question")
    ids = await store.upsert("qa", [ex(1, "aaab", dataset="sales"), ex(2, "bbbb")])
    store.close()

    reopened = ExampleStore.local(path, Factory(), engine=engine)
    namespace = reopened.get_namespace("qa")
    assert (namespace.embedder, namespace.dimension) == ("letters:5", 5)
    assert (namespace.key_fields, namespace.text_field) == (["id"], "question")
    assert namespace.fields == ["dataset", "id", "question"]
    assert reopened.count("qa") == 2
    hits = await reopened.query("qa", "a", k=1, filter={"dataset": "sales"})
    assert [h.id for h in hits] == [ids[0]]
    reopened.close()


@pytest.mark.parametrize("engine", ["edge", "client"])
def test_one_process_per_folder(tmp_path: Path, engine: str) -> None:
    path = tmp_path / "q"
    first = ExampleStore.local(path, Factory(), engine=engine)
    with pytest.raises(StoreLockedError) as caught:
        ExampleStore.local(path, Factory(), engine=engine)
    assert str(path) in caught.value.message
    assert "DAGWRIGHT_QDRANT_URL" in caught.value.message
    assert caught.value.code == "example_store_locked"
    first.close()


async def test_dimension_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "q"
    store = ExampleStore.local(path, Factory(5))
    store.create_namespace("qa", "letters:5", ["id"], "question")
    with pytest.raises(DimensionMismatchError) as caught:
        store.query_vector("qa", [1.0, 0.0, 0.0])
    assert caught.value.code == "dimension_mismatch"
    assert "5" in caught.value.message
    store.close()

    # The same spec now gives 3-dimension vectors (a changed model, say).
    changed = ExampleStore.local(path, Factory(3))
    for attempt in (changed.upsert("qa", [ex(1, "a")]), changed.query("qa", "a")):
        with pytest.raises(DimensionMismatchError) as caught:
            await attempt
        assert "5" in caught.value.message
        assert "3" in caught.value.message
    changed.close()


async def test_bad_inputs(store: ExampleStore) -> None:
    async def code_of(examples: list[dict[str, Any]]) -> tuple[str, str]:
        with pytest.raises(ExampleInputError) as caught:
            await store.upsert("qa", examples)
        return caught.value.code, caught.value.message

    code, message = await code_of([ex(1, "a"), {"question": "b"}])
    assert code == "missing_key_field"
    assert "example 1" in message
    assert "'id'" in message
    assert (await code_of([ex(1, "   ")]))[0] == "empty_text"
    assert (await code_of([{"id": 1}]))[0] == "empty_text"
    assert (await code_of([ex(1, "a", blob="x" * MAX_PAYLOAD_BYTES)]))[0] == "payload_too_large"
    assert store.count("qa") == 0  # nothing of a refused batch is written

    with pytest.raises(ExampleInputError) as caught:
        await store.query("qa", "  ")
    assert caught.value.code == "empty_text"
    with pytest.raises(ExampleInputError) as caught:
        await store.query("qa", "a", k=0)
    assert caught.value.code == "invalid_k"
    with pytest.raises(NotFoundError) as not_found:
        await store.query("nope", "a")
    assert not_found.value.code == "namespace_not_found"
    with pytest.raises(ExampleInputError) as caught:
        store.create_namespace("Bad Name", "letters:5", ["id"], "question")
    assert caught.value.code == "invalid_namespace"
    with pytest.raises(ConflictError) as conflict:
        store.create_namespace("qa", "letters:5", ["id"], "question")
    assert conflict.value.code == "namespace_exists"
    assert isinstance(caught.value, InputError)
    assert isinstance(conflict.value, DagwrightError)


async def test_delete_namespace(store: ExampleStore) -> None:
    await store.upsert("qa", [ex(1, "a")])
    store.delete_namespace("qa")
    assert store.list_namespaces() == []
    with pytest.raises(NotFoundError):
        store.count("qa")
    # The name can be used again, empty.
    store.create_namespace("qa", "letters:5", ["id"], "question")
    assert store.count("qa") == 0


async def test_load_jsonl_and_csv_with_progress(store: ExampleStore, tmp_path: Path) -> None:
    jsonl = tmp_path / "examples.jsonl"
    rows = [ex(i, "a" * (i + 1), dataset="sales" if i % 2 else "hr") for i in range(7)]
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    progress: list[tuple[int, int]] = []
    loaded = await store.load_file(
        "qa", jsonl, batch_size=3, progress=lambda d, t: progress.append((d, t))
    )
    assert loaded == 7
    assert store.count("qa") == 7
    assert progress == [(0, 7), (3, 7), (6, 7), (7, 7)]

    csv_file = tmp_path / "more.csv"
    csv_file.write_text('id,question,dataset\n100,"bbb, b",ops\n101,cc,ops\n', encoding="utf-8")
    assert await store.load_file("qa", csv_file) == 2
    hits = await store.query("qa", "b", k=5, filter={"dataset": "ops"})
    assert hits[0].payload == {"id": "100", "question": "bbb, b", "dataset": "ops"}
    assert store.count("qa") == 9

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "question": "a"}\n{"id": 2}\n', encoding="utf-8")
    with pytest.raises(ExampleInputError) as caught:
        await store.load_file("qa", bad)
    assert caught.value.code == "empty_text"
    assert "bad.jsonl" in caught.value.message
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": 1}\nnot json\n', encoding="utf-8")
    with pytest.raises(ExampleInputError) as caught:
        read_examples(broken)
    assert "line 2" in caught.value.message
    with pytest.raises(ExampleInputError) as caught:
        read_examples(tmp_path / "x.txt")
    assert caught.value.code == "unsupported_file"


def test_cli_load_query_list_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from dagwright.cli.examples import examples_app

    monkeypatch.setenv("DAGWRIGHT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv("DAGWRIGHT_QDRANT_URL", raising=False)
    rows = [
        {"id": 1, "question": "how many sales last month", "dataset": "sales"},
        {"id": 2, "question": "who joined the team in march", "dataset": "hr"},
    ]
    file = tmp_path / "qa.jsonl"
    file.write_text("\n".join(json.dumps(r) for r in rows), encoding="utf-8")
    runner = CliRunner()

    loaded = runner.invoke(
        examples_app, ["load", "qa", str(file), "--embedder", "hashing:64", "--text", "question"]
    )
    assert loaded.exit_code == 0, loaded.output
    assert "upserted 2 examples into 'qa' (new namespace)" in loaded.output
    again = runner.invoke(examples_app, ["load", "qa", str(file)])
    assert again.exit_code == 0, again.output
    other = runner.invoke(examples_app, ["load", "qa", str(file), "--embedder", "hashing:32"])
    assert other.exit_code == 2
    assert "uses the embedder 'hashing:64'" in other.output

    found = runner.invoke(examples_app, ["query", "qa", "sales last month", "-k", "1"])
    assert found.exit_code == 0, found.output
    [line] = found.output.strip().splitlines()
    assert line.split("  ")[1] == example_id("qa", [1])
    filtered = runner.invoke(examples_app, ["query", "qa", "sales", "--filter", "dataset=hr"])
    assert json.loads(filtered.output.strip().split("  ", 2)[2])["id"] == 2

    listed = runner.invoke(examples_app, ["list", "qa"])
    assert listed.exit_code == 0
    assert "2 of 2 examples" in listed.output
    deleted = runner.invoke(examples_app, ["delete", "qa", example_id("qa", [2])])
    assert deleted.exit_code == 0
    assert "deleted 1 of 1" in deleted.output
    missing = runner.invoke(examples_app, ["query", "nope", "x"])
    assert missing.exit_code == 2
    assert "no namespace 'nope'" in missing.output
