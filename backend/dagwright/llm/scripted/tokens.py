"""Token estimates and stream pieces: deterministic stand-ins for what a tokenizer does."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

# A word with the whitespace before it; a whitespace run only matches at the very end.
_PIECE = re.compile(r"\s*\S+|\s+")


def count_tokens(text: str) -> int:
    """Approximate tokens of ``text``: one per four characters, at least one."""
    return max(1, math.ceil(len(text) / 4))


def count_all(texts: Iterable[str]) -> int:
    """The summed estimate over several texts."""
    return sum(count_tokens(text) for text in texts)


def stream_pieces(text: str) -> list[str]:
    """Word-ish pieces of ``text`` to stream; joined they give ``text`` back exactly."""
    return _PIECE.findall(text)
