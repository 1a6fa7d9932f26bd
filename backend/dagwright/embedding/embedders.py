"""Choosing an embedder by its spec, and a cache in front of any embedder."""

from __future__ import annotations

import hashlib
from collections import OrderedDict

from dagwright.embedding.embedder import Embedder, EmbedderUnavailableError
from dagwright.embedding.lexical import HashingEmbedder
from dagwright.embedding.minilm import MiniLMEmbedder
from dagwright.embedding.remote import GatewayEmbedder
from dagwright.llm.gateway import LLMGateway

KNOWN_KINDS = (
    "hashing[:dimension]",
    "minilm",
    "openai[:provider[:model[:dimension]]]",
)
# With no model named, "openai" means OpenAI's small current embedding model (a provider's
# default_model is a chat model, which an embeddings endpoint would refuse).
DEFAULT_OPENAI_MODEL = "text-embedding-3-small"
DEFAULT_OPENAI_DIMENSION = 1536


class CachedEmbedder(Embedder):
    """Remembers the vectors of up to `max_items` texts (least recently used dropped first),
    so re-embedding the same examples or questions costs nothing. Keys are sha256 of the inner
    spec and the text: a cache never mixes the vectors of two embedders."""

    def __init__(self, inner: Embedder, max_items: int = 50_000, batch_size: int = 64) -> None:
        if max_items < 1 or batch_size < 1:
            raise ValueError("max_items and batch_size must be at least 1")
        self.inner = inner
        self.spec = inner.spec
        self.dimension = inner.dimension
        self.max_items = max_items
        self.batch_size = batch_size
        self._cache: OrderedDict[bytes, list[float]] = OrderedDict()

    def _key(self, text: str) -> bytes:
        return hashlib.sha256(f"{self.inner.spec}\0{text}".encode()).digest()

    async def embed(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key(text) for text in texts]
        found: dict[bytes, list[float]] = {}
        missing: dict[bytes, str] = {}  # a text repeated in one call is embedded once
        for key, text in zip(keys, texts, strict=True):
            vector = self._cache.get(key)
            if vector is not None:
                self._cache.move_to_end(key)
                found[key] = vector
            else:
                missing.setdefault(key, text)
        pending = list(missing.items())
        for start in range(0, len(pending), self.batch_size):
            batch = pending[start : start + self.batch_size]
            vectors = await self.inner.embed([text for _, text in batch])
            for (key, _), vector in zip(batch, vectors, strict=True):
                found[key] = vector
                self._cache[key] = vector
        while len(self._cache) > self.max_items:
            self._cache.popitem(last=False)
        return [found[key] for key in keys]


def _dimension(value: str, spec: str) -> int:
    try:
        dimension = int(value)
    except ValueError:
        dimension = 0
    if dimension < 1:
        raise EmbedderUnavailableError(
            f"embedder spec {spec!r}: the dimension must be a positive integer, not {value!r}"
        )
    return dimension


def calls_a_provider(spec: str) -> bool:
    """Whether the embedder of this spec calls a model provider (through the gateway)."""
    return spec.strip().partition(":")[0] == "openai"


def make_embedder(spec: str, gateway: LLMGateway | None) -> Embedder:
    """An embedder from its spec: "hashing[:dimension]" (default 256), "minilm" (local,
    offline), "openai[:provider[:model[:dimension]]]" (an empty part means its default; a
    dimension given is also sent to the API). Not cached: wrap in CachedEmbedder for that."""
    kind, _, rest = spec.strip().partition(":")
    parts = rest.split(":") if rest else []
    if kind == "hashing" and len(parts) <= 1:
        return HashingEmbedder(_dimension(parts[0], spec) if parts else 256)
    if kind == "minilm" and not parts:
        return MiniLMEmbedder()
    if kind == "openai" and len(parts) <= 3:
        if gateway is None:
            raise EmbedderUnavailableError(
                f"embedder spec {spec!r} calls a model provider, but no LLM gateway is "
                "configured here"
            )
        provider = parts[0] if parts and parts[0] else None
        model = parts[1] if len(parts) > 1 and parts[1] else DEFAULT_OPENAI_MODEL
        given = len(parts) > 2 and bool(parts[2])
        dimension = _dimension(parts[2], spec) if given else DEFAULT_OPENAI_DIMENSION
        return GatewayEmbedder(gateway, provider, model, dimension, send_dimensions=given)
    raise EmbedderUnavailableError(
        f"unknown embedder spec {spec!r}; known: {', '.join(KNOWN_KINDS)}"
    )
