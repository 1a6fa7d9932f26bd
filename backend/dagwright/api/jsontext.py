"""JSON that always leaves as valid UTF-8: a lone surrogate read from a row stored before the
request boundary refused them (api/boundary.py) becomes U+FFFD instead of failing the
response, the run list page, or the event stream it is in."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse


def utf8_bytes(text: str) -> bytes:
    """`text` as UTF-8; lone surrogates become U+FFFD (adjacent halves become their pair)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


def dumps(value: Any) -> bytes:
    """Compact JSON of an already JSON-ready value, as valid UTF-8."""
    return utf8_bytes(json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")))


class SafeJSONResponse(JSONResponse):
    """The API's JSON response (every route's, and every error's)."""

    def render(self, content: Any) -> bytes:
        return dumps(content)
