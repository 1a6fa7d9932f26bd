"""Deterministic embeddings by feature hashing: similar wording gives similar vectors."""

from __future__ import annotations

import base64
import hashlib
import math
import re
import struct

_WORD = re.compile(r"\w+")


def _add_feature(vector: list[float], feature: str) -> None:
    digest = hashlib.sha256(feature.encode("utf-8")).digest()
    bucket = int.from_bytes(digest[:8], "big") % len(vector)
    vector[bucket] += 1.0 if digest[8] & 1 else -1.0


def hashed_embedding(text: str, dimensions: int) -> list[float]:
    """An L2-normalised vector of ``dimensions`` floats for ``text``.

    Each lowercased word token adds +1 or -1 (by its sha256) to one bucket (by its sha256).
    A text without word tokens, or whose tokens cancel out, hashes as the single feature of
    its whole text, so every vector has length 1.
    """
    vector = [0.0] * dimensions
    for token in _WORD.findall(text.lower()):
        _add_feature(vector, token)
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0.0:
        vector = [0.0] * dimensions
        _add_feature(vector, text)
        norm = 1.0
    return [value / norm for value in vector]


def to_base64(vector: list[float]) -> str:
    """A vector as OpenAI's ``encoding_format: base64`` sends it: little-endian float32."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode("ascii")
