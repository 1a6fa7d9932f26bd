"""Commands that manage a running server through its admin API: the options they share and
one request helper that turns an API error into a CLI failure."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from dagwright.cli.inputs import fail

Url = Annotated[str, typer.Option(envvar="DAGWRIGHT_URL", help="The server.")]
Token = Annotated[str | None, typer.Option(envvar="DAGWRIGHT_ADMIN_TOKEN", help="The admin token.")]
DEFAULT_URL = "http://127.0.0.1:8000"


def admin_request(method: str, url: str, path: str, token: str | None, body: Any = None) -> Any:
    """The JSON answer (None when empty); exits with the API's error code and message."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.request(method, url.rstrip("/") + path, json=body, headers=headers)
    except httpx.HTTPError as exc:
        raise fail(f"cannot reach {url}: {exc}", 1) from None
    if response.status_code >= 400:
        error = response.json().get("error", {})
        raise fail(f"{error.get('code')}: {error.get('message')}", 1)
    return response.json() if response.content else None
