"""End-to-end fixtures: the real server (SQLite, the scripted model) serving the built editor,
and Debian's Chromium driven by Playwright — never a browser Playwright downloads.

Chromium is launched with the flags this closed network needs: without the background
networking ones it stalls trying to reach Google's services.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

from support.server import LiveServer, live_server

DIST = Path(__file__).resolve().parents[2] / "frontend" / "dist" / "index.html"
CHROMIUM_FLAGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def chromium_path() -> str:
    found = os.environ.get("DAGWRIGHT_CHROMIUM") or shutil.which("chromium")
    if found is None:
        pytest.fail("Chromium is not installed: `make test` installs Debian's chromium package")
    return found


# Module-scoped, not session-scoped: Playwright's sync API keeps an event loop running on
# this thread while it is open, which would break every asyncio test that runs after.
@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not DIST.is_file():
        pytest.fail("the editor is not built: `make test` builds frontend/dist first")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    # The MCP tool server of the integrations page listens on loopback: allowed explicitly.
    with live_server("sqlite", tmp_path_factory.mktemp("e2e"), egress_allow="127.0.0.1") as running:
        yield running


@pytest.fixture
def page(browser: Browser, server: LiveServer) -> Iterator[Page]:
    context = browser.new_context(base_url=server.base_url, viewport={"width": 1440, "height": 900})
    opened = context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"
