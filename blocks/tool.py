"""Tool blocks: calls out of the process (HTTP APIs) and facts about the world (the time).

Credentials never appear in a flow: a block names a secret, and the value is read from the
run's `Secrets` service when the block runs. It is kept out of events, outputs and error
messages, even when a server echoes it back.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypedDict
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import to_jsonable_python

from dagwright.egress import EgressDeniedError
from dagwright.registry import EGRESS, SECRETS, NodeContext, Service, block
from dagwright.registry.block import SideEffects
from dagwright.secrets import Redactor, check_secret_name
from dagwright.templating import check_template, render, template_variables

if TYPE_CHECKING:
    import httpx  # imported where used: ~60 ms that a flow without HTTP does not pay

# -- http_request ---------------------------------------------------------------------------

# A header name is an RFC 9110 token; a value is visible ASCII, spaces and tabs. Checking
# before sending keeps a line break from splitting a request, and keeps httpx from raising
# an error that quotes the value (which may be a secret).
_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_HEADER_VALUE = re.compile(r"[\t\x20-\x7e]*")
# A URL written without any Jinja2 syntax can be checked when the flow is saved.
_JINJA_SYNTAX = re.compile(r"\{[{%#]")
# The literal start of a URL template up to the end of its authority: scheme, "://", a host
# (with any user info and port) and the "/", "?" or "#" that ends it. A variable before that
# end could move the request to another server (`http://{{ sub }}.example.com`, or
# `https://api.example.com{{ path }}` with path = "@127.0.0.1").
_LITERAL_ORIGIN = re.compile(r"\s*(https?)://([^/?#\\\s]+)[/?#]", re.IGNORECASE)

MAX_BYTES_LIMIT = 100_000_000
# A failed response's body only feeds the error message: this much of it is read.
_ERROR_BODY_BYTES = 4096
_ERROR_BODY_CHARS = 200

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"]
# What sending the request twice does (RFC 9110 9.2): a safe method changes nothing, an
# idempotent one changes it once however often it is sent, any other may act twice.
SIDE_EFFECTS_BY_METHOD: dict[str, SideEffects] = {
    "GET": "none",
    "HEAD": "none",
    "PUT": "retryable",
    "DELETE": "retryable",
    "POST": "not_retryable",
    "PATCH": "not_retryable",
}
ResponseMode = Literal["json", "text", "auto"]


def _check_url(url: str) -> httpx.URL:
    import httpx

    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ValueError(f"url {url!r} is not a valid URL: {exc}") from None
    if parsed.scheme not in ("http", "https"):
        raise ValueError(f"url {url!r} is not an http:// or https:// URL")
    if not parsed.host:
        raise ValueError(f"url {url!r} has no host")
    return parsed


def _template_origin(url: str) -> str | None:
    """The scheme and authority a URL template writes literally (`https://api.example.com`),
    or None when a template variable sits in them."""
    jinja = _JINJA_SYNTAX.search(url)
    if jinja is None:
        return url.strip()
    found = _LITERAL_ORIGIN.match(url[: jinja.start()])
    return None if found is None else f"{found.group(1)}://{found.group(2)}"


def _origin(url: httpx.URL) -> tuple[str, str, str, int | None]:
    return url.scheme, url.userinfo.decode(), url.host, url.port


class HttpRequestConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: HttpMethod = Field("GET", description="The HTTP method.")
    # Before url: url's validator reads it.
    variable_host: bool = Field(
        False,
        description="Let template variables set the URL's scheme, host or port. Off, the "
        "server is the one the URL writes, whatever a caller sends.",
    )
    url: str = Field(
        description="The address, a Jinja2 template: each variable it uses, such as {{ id }}, "
        "becomes an input port. Write {{ q | urlencode }} for a value inside a path or query."
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Headers sent as written. Never put a credential here: use secret_headers.",
    )
    secret_headers: dict[str, str] = Field(
        default_factory=dict,
        description="Header name -> secret name, e.g. Authorization -> github_token. The "
        "value is read from the run's secrets and never shown.",
    )
    query: dict[str, str] = Field(
        default_factory=dict,
        description="Query parameters added to the URL (encoded for you); one the URL already "
        "has is replaced.",
    )
    timeout: float = Field(
        30, gt=0, le=300, description="Seconds the whole request may take, body included."
    )
    max_bytes: int = Field(
        1_000_000,
        gt=0,
        le=MAX_BYTES_LIMIT,
        description="The largest response body accepted; a larger one fails the node.",
    )
    fail_on_error_status: bool = Field(
        True, description="A 4xx or 5xx response fails the node; off, it is returned as any."
    )
    response: ResponseMode = Field(
        "auto",
        description="How to read the body: json (parsed), text, or auto (parsed when the "
        "server says it is JSON, else text).",
    )

    @field_validator("url")
    @classmethod
    def _url_parses(cls, url: str, info: ValidationInfo) -> str:
        check_template(url, field="url")
        if not _JINJA_SYNTAX.search(url):
            _check_url(url.strip())
        elif not info.data.get("variable_host", False) and _template_origin(url) is None:
            raise ValueError(
                "a template variable sits in the URL's scheme, host or port (before the '/' "
                "that ends the host), so a caller could send the request to another server: "
                "write them literally (https://api.example.com/{{ path }}), or set "
                "variable_host to allow it"
            )
        return url

    @field_validator("headers")
    @classmethod
    def _plain_headers(cls, headers: dict[str, str]) -> dict[str, str]:
        for name, value in headers.items():
            _check_header_name(name)
            if not _HEADER_VALUE.fullmatch(value):
                raise ValueError(
                    f"header {name!r}: a value may hold only printable ASCII, spaces and tabs"
                )
        return headers

    @field_validator("secret_headers")
    @classmethod
    def _secret_names(cls, secret_headers: dict[str, str]) -> dict[str, str]:
        for name, secret in secret_headers.items():
            _check_header_name(name)
            check_secret_name(secret)
        return secret_headers

    @model_validator(mode="after")
    def _no_header_twice(self) -> HttpRequestConfig:
        both = {name.lower() for name in self.headers} & {
            name.lower() for name in self.secret_headers
        }
        if both:
            raise ValueError(
                f"header(s) {', '.join(sorted(both))} are in both headers and secret_headers"
            )
        return self


def _check_header_name(name: str) -> None:
    if not _HEADER_NAME.fullmatch(name):
        raise ValueError(f"{name!r} is not a valid header name")


def _url_ports(config: HttpRequestConfig) -> list[str]:
    return list(template_variables(config.url))


def _http_needs(config: HttpRequestConfig) -> tuple[Service[Any], ...]:
    return (EGRESS, SECRETS) if config.secret_headers else (EGRESS,)


class HttpResponse(TypedDict):
    status: Annotated[int, "The HTTP status code, such as 200."]
    headers: Annotated[dict[str, str], "The response's headers, names in lower case."]
    body: Annotated[Any, "Parsed JSON or text, as the response setting says."]


@block(
    "http_request",
    category="tool",
    description="Call an HTTP API; the URL is a template whose variables are input ports.",
    example="GET https://api.example.com/users/{{ id }} -> status, headers, body",
    dynamic_ports=_url_ports,
    needs=lambda config: _http_needs(config),
    # A durable run resumed after its worker died sends a GET again, and fails (naming the
    # node) rather than send a POST it may have sent already.
    side_effects=lambda config: SIDE_EFFECTS_BY_METHOD[config.method],
)
async def http_request(
    config: HttpRequestConfig,
    ctx: NodeContext,
    body: Annotated[Any, "Sent as JSON when it is not None."] = None,
    **variables: Any,
) -> HttpResponse:
    """Sends an HTTP request and returns the response's `status`, `headers` and `body`.

    The URL is a Jinja2 template: every variable it uses (`{{ user_id }}`) is an input port,
    so `https://api.example.com/users/{{ user_id }}` takes a `user_id` port. Values are put
    in as they are: write `{{ q | urlencode }}` for text that may hold spaces or `&`, or set
    fixed parameters in `query`. The URL must be http:// or https://. A value wired into the
    `body` port is sent as JSON.

    The server is the one the URL writes: a variable may sit in the path, query or fragment,
    not in the scheme, host or port, unless `variable_host` is on. Requests go only to
    public addresses, never to this server, loopback, link-local or private networks, unless
    the operator allows a host in DAGWRIGHT_EGRESS_ALLOW (refused: `egress_denied`).

    Credentials go in `secret_headers`: a header name mapped to a secret's name (for example
    `Authorization` -> `github_token`). The value is read from the run's secrets when the
    request is made (from the environment variable DAGWRIGHT_SECRET_GITHUB_TOKEN by default);
    it never appears in the flow, in the run's events or in error messages, and where the
    server sends it back it is replaced by `***`.

    With `response` set to auto (the default), a body the server labels JSON is parsed and
    anything else is returned as text; json always parses (an empty body gives None) and
    text never does. A 4xx or 5xx status fails the node with the start of the body in the
    message, unless `fail_on_error_status` is off. Redirects are not followed: a 3xx is
    returned as it is. The request fails after `timeout` seconds, and when the body grows
    past `max_bytes` (it is read as it arrives, not downloaded first).

    A queued run resumed after its worker died (queue mode) sends a GET, HEAD, PUT or
    DELETE again, but fails naming this node rather than send a POST or PATCH twice."""
    rendered = render(config.url, variables, what="url").strip()
    target = _check_url(rendered)
    _check_origin(config, target)
    if config.query:
        # Merged here: httpx's params= would drop the query the URL template wrote.
        target = target.copy_merge_params(config.query)
    url = str(target)
    headers = dict(config.headers)
    secret_values: list[str] = []
    if config.secret_headers:
        secrets = ctx.service(SECRETS)
        for header, name in config.secret_headers.items():
            value = secrets.get(name)
            if not _HEADER_VALUE.fullmatch(value):
                raise ValueError(
                    f"secret {name!r} cannot be sent in header {header!r}: it holds a line "
                    "break or another character a header cannot carry"
                )
            headers[header] = value
            secret_values.append(value)
    content: bytes | None = None
    if body is not None:
        content = _json_bytes(body)
        if not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = "application/json"
    ctx.emit("request", method=config.method, url=url)
    return await _send(config, ctx, url, headers, content, Redactor(secret_values))


def _check_origin(config: HttpRequestConfig, target: httpx.URL) -> None:
    """Checked again on the rendered URL: the server must be the one the template writes
    (a value with `@`, `#`, `?` or `\\` cannot move it)."""
    if config.variable_host:
        return
    import httpx

    literal = _template_origin(config.url)
    assert literal is not None  # the config's validator refused the template otherwise
    expected = _origin(httpx.URL(literal))
    if _origin(target) != expected:
        scheme, _, host, port = expected
        raise EgressDeniedError(
            f"url: the rendered URL goes to {target.scheme}://{target.host}"
            f"{'' if target.port is None else f':{target.port}'}, not to the "
            f"{scheme}://{host}{'' if port is None else f':{port}'} the template writes: "
            "a value may not change the scheme, host or port"
        )


def _json_bytes(body: Any) -> bytes:
    try:
        text = json.dumps(body, ensure_ascii=False, allow_nan=False, default=to_jsonable_python)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"input 'body' cannot be sent as JSON: {exc}") from None
    return text.encode()


def _reason(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


async def _send(
    config: HttpRequestConfig,
    ctx: NodeContext,
    url: str,
    headers: dict[str, str],
    content: bytes | None,
    redact: Redactor,
) -> HttpResponse:
    import httpx

    from dagwright.egress_http import async_client

    timed_out = f"request to {url} timed out after {config.timeout:g}s"
    # httpx's timeout bounds each step (connect, each read); the scope bounds the whole
    # request, so a server that trickles bytes cannot hold the node for longer.
    scope = asyncio.timeout(config.timeout)
    try:
        async with (
            scope,
            async_client(ctx.service(EGRESS), timeout=config.timeout) as client,
            client.stream(config.method, url, headers=headers, content=content) as response,
        ):
            return await _read(config, url, response, redact)
    except TimeoutError:
        if scope.expired():
            raise ValueError(timed_out) from None
        raise
    except httpx.TimeoutException:
        raise ValueError(timed_out) from None
    except httpx.ConnectError as exc:
        raise ValueError(redact(f"could not connect to {url}: {_reason(exc)}")) from None
    except httpx.HTTPError as exc:
        raise ValueError(redact(f"request to {url} failed: {_reason(exc)}")) from None


async def _read(
    config: HttpRequestConfig, url: str, response: httpx.Response, redact: Redactor
) -> HttpResponse:
    failed = config.fail_on_error_status and response.is_error
    limit = min(config.max_bytes, _ERROR_BODY_BYTES) if failed else config.max_bytes
    data = bytearray()
    # aiter_bytes yields the decoded body: the limit also holds against a compressed bomb.
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > limit:
            if failed:
                break
            raise ValueError(
                f"the response from {url} is larger than max_bytes ({config.max_bytes} bytes); "
                "raise max_bytes or ask for less"
            )
    text = redact(_decode(bytes(data), response))
    if failed:
        status = f"{response.status_code} {response.reason_phrase}".rstrip()
        message = f"{config.method} {url} returned {status}"
        if text.strip():
            # Cut after redacting: a cut through a secret would leave part of it showing.
            snippet = text[:_ERROR_BODY_CHARS] + ("..." if len(text) > _ERROR_BODY_CHARS else "")
            message += f": {snippet}"
        raise ValueError(redact(message))
    return {
        "status": response.status_code,
        "headers": {redact(name): redact(value) for name, value in response.headers.items()},
        "body": _parse_body(config.response, url, text, response, redact),
    }


def _decode(data: bytes, response: httpx.Response) -> str:
    try:
        return data.decode(response.charset_encoding or "utf-8", errors="replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", errors="replace")


def _is_json_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or media.endswith("+json")


def _parse_body(
    mode: ResponseMode, url: str, text: str, response: httpx.Response, redact: Redactor
) -> Any:
    if mode == "text":
        return text
    if mode == "auto" and not _is_json_type(response.headers.get("content-type", "")):
        return text
    if not text.strip():
        return None  # 204 No Content, HEAD
    try:
        # The text is already redacted; a secret written with JSON escapes only shows once
        # parsed, so the parsed strings are redacted too.
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if mode == "auto":
            return text  # the server's label was wrong; the text is still worth having
        raise ValueError(
            f"the response from {url} is not valid JSON: {exc.msg} at line {exc.lineno}, "
            f"column {exc.colno}"
        ) from None
    return _redact_json(value, redact) if redact else value


def _redact_json(value: Any, redact: Redactor) -> Any:
    """Redacts every string (keys too) of a freshly parsed JSON value, changing it in place.
    A work list rather than recursion: json.loads accepts nesting deeper than our stack."""
    if isinstance(value, str):
        return redact(value)
    work: list[Any] = [value]
    while work:
        item = work.pop()
        if isinstance(item, dict):
            entries = list(item.items())
            item.clear()
            for key, child in entries:
                item[redact(key)] = redact(child) if isinstance(child, str) else child
                if isinstance(child, dict | list):
                    work.append(child)
        elif isinstance(item, list):
            for index, child in enumerate(item):
                if isinstance(child, str):
                    item[index] = redact(child)
                elif isinstance(child, dict | list):
                    work.append(child)
    return value


# -- now ------------------------------------------------------------------------------------


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):  # ValueError: a path such as ../x or /etc
        raise ValueError(
            f"unknown time zone {name!r}: use an IANA name such as Europe/Paris, or UTC"
        ) from None


class NowConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    timezone: str = Field("UTC", description="An IANA time zone, such as Europe/Paris or UTC.")
    format: str | None = Field(
        None,
        description="A strftime format such as %Y-%m-%d %H:%M; empty for ISO 8601 "
        "(2024-05-01T14:30:00+02:00).",
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, name: str) -> str:
        _zone(name)
        return name

    @field_validator("format", mode="before")
    @classmethod
    def _empty_is_iso(cls, fmt: Any) -> Any:
        return None if fmt == "" else fmt  # what a cleared form field sends

    @field_validator("format")
    @classmethod
    def _formats(cls, fmt: str | None) -> str | None:
        if fmt is not None:
            try:
                datetime(2000, 1, 1).strftime(fmt)
            except ValueError as exc:  # e.g. an embedded NUL, or a bad directive on Windows
                raise ValueError(f"format {fmt!r} cannot be used: {exc}") from None
        return fmt


@block(
    "now",
    category="tool",
    description="The current date and time in a time zone, as text.",
    example="timezone Europe/Paris, format %Y-%m-%d -> '2024-05-01'",
    inline=True,
)
def now(config: NowConfig) -> str:
    """The date and time when the node runs, in the configured time zone (UTC unless set).
    Without a format it is ISO 8601 to the second with the zone's offset, such as
    `2024-05-01T14:30:00+02:00`; with one, it is written by Python's strftime, such as
    `%A %d %B %Y` for `Wednesday 01 May 2024`. Useful to tell a model what day it is."""
    moment = datetime.now(_zone(config.timezone))
    if config.format is None:
        return moment.isoformat(timespec="seconds")
    return moment.strftime(config.format)
