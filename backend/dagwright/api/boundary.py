"""The request boundary: what every request must be before a route sees it, checked once here.

- A body larger than the server accepts is 413 `payload_too_large`.
- A JSON body must be UTF-8 text whose values can all be stored: no lone surrogate (a
  `\\ud800` escape that pairs with nothing: no UTF-8 encoding exists, so SQLite stores it
  and every later read fails, PostgreSQL refuses it), no NUL character (PostgreSQL text
  cannot hold one), no number JSON cannot carry (`NaN`, `Infinity`, or a literal such as
  `1e999` that overflows to infinity: Python reads them, PostgreSQL refuses the JSON it
  writes back); and it may nest at most MAX_JSON_DEPTH arrays and objects deep (deeper
  nesting makes recursive code downstream fail). Otherwise 422 `invalid_request`, naming the
  field.
- A body of any other content type (`text/plain`, none of the JSON ones) is held to the same
  rules when it is JSON: a route that reads its raw body as JSON (a webhook) must not see
  what a JSON route would not. A body that is not UTF-8 JSON passes (uploads, forms).
- The URL's path and query may not hold a NUL character either (422).

What leaves is made safe in api/jsontext.py.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterator
from typing import Any, Final

from starlette.datastructures import Headers
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dagwright.api.errors import error_response

MAX_JSON_DEPTH: Final = 64
# Bodies larger than this are checked in a worker thread: the event loop keeps answering.
_THREAD_ABOVE: Final = 256 * 1024


# Text that may hold a number JSON cannot carry: the constants, an exponent, or more digits
# than a finite float has (a 400-digit literal overflows without an exponent).
_NUMBER_SUSPECT: Final = re.compile(r"NaN|Infinity|[0-9][eE]|[0-9.]{300}")


# -- checking a decoded body -------------------------------------------------------------


class Unstorable:
    """Stands in, while a body is checked, for a number JSON cannot carry (its literal)."""

    __slots__ = ("literal",)

    def __init__(self, literal: str) -> None:
        self.literal = literal


def _float_or_unstorable(literal: str) -> float | Unstorable:
    value = float(literal)
    return value if math.isfinite(value) else Unstorable(literal)


def parse_checked(text: str) -> Any:
    """json.loads, with each non-finite number (NaN, Infinity, 1e999) an Unstorable, for
    body_problem to name."""
    return json.loads(text, parse_constant=Unstorable, parse_float=_float_or_unstorable)


def _string_problem(text: str) -> str | None:
    if "\x00" in text:
        return "holds a NUL character (U+0000), which cannot be stored"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(text[exc.start])
            return f"holds a lone surrogate (\\u{code:04x}), which is not valid Unicode text"
    return None


def _path(parts: tuple[str | int, ...], shown: int = 12) -> str:
    path = ""
    for part in parts[:shown]:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else part)
    if len(parts) > shown:
        path += "..."
    return path or "(body)"


def _walk(value: Any) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every value in the document with its path, depth first, without recursion (so a deep
    document cannot overflow the stack here)."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        yield path, item
        if isinstance(item, dict):
            stack.extend(((*path, key), child) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend(
                ((*path, index), child) for index, child in reversed(list(enumerate(item)))
            )


def body_problem(document: Any, max_depth: int = MAX_JSON_DEPTH) -> tuple[str, str] | None:
    """(field, message) for the first string that cannot be stored or the first value nested
    deeper than `max_depth`; None when the whole document is fine."""
    for path, item in _walk(document):
        if len(path) > max_depth:
            return _path(path), f"nests deeper than {max_depth} levels"
        if isinstance(item, str):
            problem = _string_problem(item)
            if problem is not None:
                return _path(path), f"the text {problem}"
        elif isinstance(item, Unstorable):
            literal = item.literal if len(item.literal) <= 20 else item.literal[:17] + "..."
            return _path(path), (
                f"the number {literal} is not a finite number (NaN, Infinity and numbers "
                "beyond about 1.8e308 cannot be stored)"
            )
        elif isinstance(item, float) and not math.isfinite(item):
            return _path(path), "is not a finite number, which cannot be stored"
        elif isinstance(item, dict):
            for key in item:
                problem = _string_problem(key)
                if problem is not None:
                    return _path((*path, key)), f"the key {problem}"
    return None


def check_json_body(
    body: bytes, max_depth: int = MAX_JSON_DEPTH, *, declared: bool = True
) -> tuple[str, str] | None:
    """(field, message) when a JSON body may not pass, else None. A body that is not JSON at
    all passes: the route's own parsing says what is wrong with it. `declared`: the body
    says it is JSON (its content type), so one that is not UTF-8 is refused; an undeclared
    one that is not UTF-8 is no JSON and passes."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not declared:
            return None
        # json.loads would decode it with "surrogatepass": raw surrogate bytes would pass.
        return "(body)", f"the body is not valid UTF-8 (byte {exc.start})"
    # Lone surrogates and NUL can only arrive as \u escapes (raw ones are invalid UTF-8 or
    # invalid JSON), a document cannot nest deeper than it has brackets, and a number JSON
    # cannot carry needs a constant, an exponent or hundreds of digits: most bodies need no
    # second parse.
    if (
        "\\u" not in text
        and text.count("[") + text.count("{") <= max_depth
        and _NUMBER_SUSPECT.search(text) is None
    ):
        return None
    try:
        document = parse_checked(text)
    except RecursionError:
        return "(body)", f"nests deeper than {max_depth} levels"
    except ValueError:
        return None
    return body_problem(document, max_depth)


def url_problem(scope: Scope) -> tuple[str, str] | None:
    if "\x00" in scope.get("path", ""):
        return "(path)", "the URL path holds a NUL character (%00)"
    query: bytes = scope.get("query_string", b"")
    if b"%00" in query or b"\x00" in query:
        return "(query)", "the query string holds a NUL character (%00)"
    return None


def _is_json(content_type: str | None) -> bool:
    """What FastAPI parses as JSON (a body without a content type is checked too)."""
    if not content_type:
        return True
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _is_form(content_type: str | None) -> bool:
    """Uploads and forms: never JSON, not worth a look."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    return kind in ("multipart/form-data", "application/x-www-form-urlencoded")


def _refusal(field: str, message: str) -> Response:
    summary = f"{field}: {message}"
    return error_response(
        422, "invalid_request", summary, problems=[{"field": field, "message": message}]
    )


class RequestGuard:
    """ASGI middleware: the checks above, before the app runs. A body is read whole (the
    route would read it whole anyway), checked, then handed on unchanged."""

    def __init__(self, app: ASGIApp, limit: int, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.app = app
        self.limit = limit
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        problem = url_problem(scope)
        if problem is not None:
            await _refusal(*problem)(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.limit:
            await self._too_large(scope, receive, send)
            return
        if not (length.isdigit() and int(length) > 0) and "transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client left: the app sees it
                await self.app(scope, _replay([], message, receive), send)
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.limit:
                await self._too_large(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        declared = _is_json(headers.get("content-type"))
        if declared or not _is_form(headers.get("content-type")):
            if len(body) > _THREAD_ABOVE:
                problem = await asyncio.to_thread(
                    check_json_body, body, self.max_depth, declared=declared
                )
            else:
                problem = check_json_body(body, self.max_depth, declared=declared)
            if problem is not None:
                await _refusal(*problem)(scope, receive, send)
                return
        request: Message = {"type": "http.request", "body": body, "more_body": False}
        await self.app(scope, _replay([request], None, receive), send)

    @staticmethod
    async def _too_large(scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, "payload_too_large", "the request body is larger than the server accepts"
        )
        await response(scope, receive, send)


def _replay(messages: list[Message], last: Message | None, receive: Receive) -> Receive:
    """A receive that gives `messages` (then `last`), and afterwards the real receive (so a
    streaming route still hears the client disconnect)."""
    pending = [*messages, *([last] if last is not None else [])]

    async def replayed() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
