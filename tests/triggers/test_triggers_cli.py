"""`dagwright triggers` against a real server: add a webhook and a schedule, list them, see
a firing, disable and delete."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from dagwright.cli.main import app as cli
from dagwright.services.webhook_signing import signed_headers
from support.server import Api, LiveServer, example, live_server

runner = CliRunner()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", Path(tmp_path_factory.mktemp("server"))) as running:
        yield running


def _triggers(server: LiveServer, *args: str) -> str:
    done = runner.invoke(cli, ["triggers", *args, "--url", server.base_url])
    assert done.exit_code == 0, done.output
    return done.output


def test_triggers_are_managed_from_the_terminal(server: LiveServer) -> None:
    api: Api = server.api
    api.published_app("cli-hooked", example("hello"))
    assert api.http.put("/api/v1/secrets/cli_key", json={"value": "k3y"}).status_code == 204
    hook = json.loads(
        _triggers(server, "add-webhook", "cli-hooked", "--map", "name=who", "--secret", "cli_key")
    )
    cron = json.loads(
        _triggers(
            server,
            "add-cron",
            "cli-hooked",
            "--cron",
            "0 9 * * 1-5",
            "--timezone",
            "Europe/Paris",
            "-i",
            "name=Team",
        )
    )
    assert cron["inputs"] == {"name": "Team"}
    listed = json.loads(_triggers(server, "list", "cli-hooked"))
    assert {t["kind"] for t in listed} == {"webhook", "cron"}

    body = json.dumps({"who": "Cy"}).encode()
    fired = httpx.post(
        server.base_url + hook["url"], content=body, headers=signed_headers("k3y", body)
    )
    assert fired.status_code == 202
    [firing] = json.loads(_triggers(server, "firings", hook["id"]))
    assert firing["run_id"] == fired.json()["run_id"]

    assert json.loads(_triggers(server, "disable", cron["id"]))["enabled"] is False
    assert _triggers(server, "delete", hook["id"]).strip() == f"deleted {hook['id']}"
    refused = runner.invoke(
        cli, ["triggers", "add-cron", "cli-hooked", "--cron", "nope", "--url", server.base_url]
    )
    assert refused.exit_code == 1
    assert "invalid_trigger" in refused.output
