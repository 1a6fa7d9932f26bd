"""A deterministic lexical embedder by feature hashing: no model, no network, instant. Texts
that share words (and word pairs) get close vectors; it knows nothing of meaning, so it is for
tests and for a fallback where any stable vector will do."""

from __future__ import annotations

import hashlib
import itertools
import math
import re

from dagwright.embedding.embedder import Embedder

_WORD = re.compile(r"\w+")


def _add(vector: list[float], feature: str) -> None:
    # One 8-byte blake2b digest gives both the bucket and the sign; the sign makes collisions
    # cancel out on average instead of always adding up (the "hashing trick").
    digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
    value = int.from_bytes(digest, "big")
    vector[(value >> 1) % len(vector)] += 1.0 if value & 1 else -1.0


class HashingEmbedder(Embedder):
    """Lowercased word tokens and word bigrams hashed into `dimension` signed buckets, then
    L2-normalised. The same text always gives the same vector, on every machine."""

    def __init__(self, dimension: int = 256) -> None:
        if dimension < 1:
            raise ValueError(f"the hashing dimension must be at least 1, not {dimension}")
        self.dimension = dimension
        self.spec = f"hashing:{dimension}"

    def embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dimension
        words = _WORD.findall(text.lower())
        for word in words:
            _add(vector, word)
        # Bigrams are prefixed so that a pair never hashes like a single word.
        for first, second in itertools.pairwise(words):
            _add(vector, f"2:{first} {second}")
        norm = math.sqrt(sum(v * v for v in vector))
        if norm == 0.0:
            # No word tokens (or all cancelled out): hash the whole text so that every vector
            # still has length 1 and different texts still differ.
            vector = [0.0] * self.dimension
            _add(vector, "0:" + text)
            norm = 1.0
        return [v / norm for v in vector]

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_one(text) for text in texts]
