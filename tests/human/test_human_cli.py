"""`dagwright human` against a real server: the waiting list, a request's form, answering."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dagwright.cli.main import app as cli
from support.server import LiveServer, edge, flow, live_server, node

runner = CliRunner()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", Path(tmp_path_factory.mktemp("server"))) as running:
        yield running


def _human(server: LiveServer, *args: str) -> str:
    done = runner.invoke(cli, ["human", *args, "--url", server.base_url])
    assert done.exit_code == 0, done.output
    return done.output


def test_waiting_runs_are_listed_and_answered_from_the_terminal(server: LiveServer) -> None:
    asking = flow(
        [
            node("q", "text_input", name="q"),
            node("ask", "human_input", message="How many {{ q }}?", inputs=["q"]),
            node("echo", "template", template="{{ a.n + 1 }}"),
            node("out", "output", name="answer"),
        ],
        [edge("q", "ask.q"), {**edge("ask", "echo.a"), "branch": "answered"}, edge("echo", "out")],
    )
    asking["nodes"][1]["config"]["fields"] = [{"name": "n", "type": "integer"}]
    key = server.api.published_app("counting", asking)
    paused = server.api.run("counting", key, {"q": "apples"}).json()
    listed = _human(server, "list")
    [line] = [entry for entry in listed.splitlines() if paused["run_id"] in entry]
    request_id = line.split()[0]
    assert line.endswith("ask: How many apples?")
    assert '"type": "integer"' in _human(server, "show", request_id)

    refused = runner.invoke(
        cli, ["human", "answer", request_id, "-v", "n=many", "--url", server.base_url]
    )
    assert refused.exit_code == 1
    assert "'n' must be integer" in refused.output
    resumed_id = _human(server, "answer", request_id, "-v", "n=41").strip()
    assert server.api.wait_for_run(resumed_id)["outputs"] == {"answer": "42"}
    assert paused["run_id"] not in _human(server, "list")


def test_the_list_pages_oldest_first_and_names_the_next_page(server: LiveServer) -> None:
    asking = flow(
        [
            node("q", "text_input", name="q"),
            node("ask", "human_input", message="Page {{ q }}?", inputs=["q"]),
            node("out", "output", name="answer"),
        ],
        [edge("q", "ask.q"), {**edge("ask", "out"), "branch": "answered"}],
    )
    key = server.api.published_app("paging", asking)
    runs = [server.api.run("paging", key, {"q": str(n)}).json()["run_id"] for n in range(3)]
    listed = _human(server, "list", "--limit", "200").splitlines()
    every = [line for line in listed if " run " in line]
    total = len(every)  # other tests' requests may wait too
    assert [line.split()[2] for line in every][-3:] == runs  # oldest first
    first = _human(server, "list", "--limit", "2")
    assert f"2 of {total} requests; next page: --offset 2" in first
    last = _human(server, "list", "--offset", str(total - 1), "--limit", "2")
    assert runs[2] in last
    assert runs[1] not in last
    assert f"1 of {total} requests\n" in last
