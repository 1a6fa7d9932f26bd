"""Servers as real processes: two replicas sharing one PostgreSQL schema (runs visible from
both, a cancel sent to either one), two processes of the same replica name (neither touches
the other's runs; when one is killed, the other closes its runs), a replica killed mid-run
(SIGKILL) and restarted (the run is interrupted, what finished before the crash is kept), and
`dagwright call` against a running server."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool
from typer.testing import CliRunner

from dagwright.cli.main import app as cli
from support.server import (
    LiveServer,
    ServerProcess,
    example,
    live_server,
    postgres_schema,
    slow_flow,
    sse_events,
    subprocess_environment,
)


def leases(database_url: str) -> dict[str, tuple[str, int]]:
    """The replica leases in the database: lease id -> (replica name, pid)."""
    engine = create_engine(database_url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT id, name, pid FROM replicas")).all()
    finally:
        engine.dispose()
    return {row[0]: (row[1], row[2]) for row in rows}


def sqlite_url(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / 'dagwright.db'}"


def pid(server: ServerProcess) -> int:
    assert server.process is not None
    return server.process.pid


@pytest.fixture(params=[("replica-a", "replica-b"), ("twin", "twin")], ids=["named", "twins"])
def replicas(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    name_a, name_b = request.param
    with postgres_schema() as url:
        a = ServerProcess(tmp_path / "a", name_a, url)
        b = ServerProcess(tmp_path / "b", name_b, url)
        try:
            with ThreadPoolExecutor(2) as pool:  # both migrate the empty schema at once
                list(pool.map(lambda server: server.start(), (a, b)))
            yield a, b
        finally:
            a.stop()
            b.stop()


def test_two_replicas_share_runs_and_cancels(
    replicas: tuple[ServerProcess, ServerProcess],
) -> None:
    """With two names, or one name shared (as `serve --workers 2` does): processes differ by
    their replica leases, which the runs carry."""
    a, b = replicas
    assert a.database_url is not None
    api_a, api_b = a.api(), b.api()
    try:
        key = api_a.published_app("shared", example("hello"))
        # Made through A, callable through B (same database).
        on_b = api_b.run("shared", key, {"name": "Bea"})
        assert on_b.status_code == 200, on_b.text
        run_id = api_a.run("shared", key, {"name": "Ann"}).json()["run_id"]
        seen_from_b = api_b.get_run(run_id)
        lease_a = seen_from_b["replica"]
        lease_b = api_a.get_run(on_b.json()["run_id"])["replica"]
        assert leases(a.database_url) == {
            lease_a: (a.replica, pid(a)),
            lease_b: (b.replica, pid(b)),
        }
        assert seen_from_b["status"] == "succeeded"
        assert seen_from_b["outputs"] == {"greeting": "Hello, Ann!"}
        assert [n["node"] for n in seen_from_b["nodes"]] == ["name", "greet", "greeting"]

        slow_key = api_a.published_app("shared-slow", slow_flow(30))
        started = api_a.run("shared-slow", slow_key, {"value": "v"}, **{"async": True})
        assert started.status_code == 202
        slow_id = started.json()["run_id"]
        api_b.wait_for_run(slow_id, lambda r: any(n["node"] == "quick" for n in r["nodes"]))
        # B cannot stream a run that A holds: it answers with the record so far.
        with api_b.http.stream("GET", f"/api/v1/runs/{slow_id}/events") as response:
            elsewhere = sse_events(response)
        assert [e.event for e in elsewhere] == ["run_record"]
        assert elsewhere[0].data["status"] == "running"
        requested = api_b.http.post(f"/api/v1/runs/{slow_id}/cancel")
        assert requested.status_code == 200, requested.text
        assert requested.json()["cancel_requested_at"] is not None
        # Replica A notices the request (it polls every half second) and cancels its run.
        record = api_b.wait_for_run(slow_id, timeout=5)
        assert record["status"] == "cancelled"
        assert record["replica"] == lease_a
        assert {n["node"]: n["status"] for n in record["nodes"]}["slow"] == "cancelled"
        assert api_a.get_run(slow_id)["status"] == "cancelled"

        # A key revoked through A is refused by B too, once B's cache entry expires (2 s).
        key_id = api_a.http.get("/api/v1/apps/shared/keys").json()[0]["id"]
        assert api_b.run("shared", key, {"name": "Cy"}).status_code == 200
        assert api_a.http.delete(f"/api/v1/apps/shared/keys/{key_id}").status_code == 204
        assert api_a.run("shared", key, {"name": "Cy"}).status_code == 401
        deadline = time.monotonic() + 5
        while api_b.run("shared", key, {"name": "Cy"}).status_code != 401:
            assert time.monotonic() < deadline, "replica B still takes the revoked key"
            time.sleep(0.1)
    finally:
        api_a.close()
        api_b.close()


def test_a_killed_process_has_its_runs_closed_by_a_sibling_of_the_same_name(
    tmp_path: Path,
) -> None:
    """Two processes named alike on one database (as `serve --workers 2`): the second one's
    start-up leaves the first one's run alone; once the first is killed, the second's
    periodic recovery (every 10 s) finds its lease dead and interrupts its run."""
    with postgres_schema() as url:
        first = ServerProcess(tmp_path / "first", "twin", url).start()
        second: ServerProcess | None = None
        try:
            api = first.api()
            try:
                key = api.published_app("twins", slow_flow(60))
                started = api.run("twins", key, {"value": "v"}, **{"async": True})
                assert started.status_code == 202
                run_id = started.json()["run_id"]
                api.wait_for_run(
                    run_id, lambda r: any(n["node"] == "quick" for n in r["nodes"]), key=key
                )
            finally:
                api.close()
            second = ServerProcess(tmp_path / "second", "twin", url).start()
            api = second.api()
            try:
                running = api.get_run(run_id)
                assert running["status"] == "running"  # the sibling's start-up spared it
                assert leases(url)[running["replica"]] == ("twin", pid(first))
                first.kill()
                record = api.wait_for_run(run_id, timeout=20)
                assert record["status"] == "interrupted"
                assert {n["node"]: n["status"] for n in record["nodes"]}["quick"] == "succeeded"
                assert running["replica"] not in leases(url)
            finally:
                api.close()
        finally:
            first.kill()
            if second is not None:
                second.stop()


def test_a_killed_replica_leaves_its_run_interrupted(tmp_path: Path) -> None:
    data_dir = tmp_path / "crashy"
    server = ServerProcess(data_dir, "crashy").start()
    try:
        api = server.api()
        try:
            key = api.published_app("crashing", slow_flow(30))
            started = api.run("crashing", key, {"value": "v"}, **{"async": True})
            assert started.status_code == 202
            run_id = started.json()["run_id"]
            running = api.wait_for_run(
                run_id, lambda r: any(n["node"] == "quick" for n in r["nodes"]), key=key
            )
            assert running["status"] == "running"
        finally:
            api.close()
        server.kill()
        # The killed process's lease is left behind, fresh: the restarted process (a new
        # lease) sees that its pid is gone from this host and takes it for dead at once.
        assert leases(sqlite_url(data_dir)) == {running["replica"]: ("crashy", pid(server))}

        restarted = ServerProcess(data_dir, "crashy", port=server.port).start()
        try:
            api = restarted.api()
            try:
                record = api.get_run(run_id)
                assert record["status"] == "interrupted"
                assert record["error"]["code"] == "interrupted"
                assert record["finished_at"] is not None
                quick = {n["node"]: n for n in record["nodes"]}["quick"]
                assert quick["status"] == "succeeded"
                assert quick["output"] == "quick:v"
                assert "slow" not in {n["node"] for n in record["nodes"]}  # never finished
                # The restarted replica serves as before.
                again = api.run("crashing", key, {"value": "w"}, version="1", **{"async": True})
                assert again.status_code == 202
                assert leases(sqlite_url(data_dir)) == {
                    api.get_run(again.json()["run_id"])["replica"]: ("crashy", pid(restarted))
                }
            finally:
                api.close()
        finally:
            restarted.stop()
    finally:
        server.kill()


# -- the CLI against a running server -----------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server("sqlite", tmp_path_factory.mktemp("cli")) as running:
        yield running


def test_dagwright_call_prints_the_outputs(server: LiveServer, tmp_path: Path) -> None:
    key = server.api.published_app("cli-hello", example("hello"))
    command = shutil.which("dagwright", path=str(Path(sys.executable).parent))
    assert command is not None
    done = subprocess.run(
        [command, "call", "cli-hello", "-i", "name=Ann", "--url", server.base_url, "--key", key],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_environment(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"greeting": "Hello, Ann!"}


def test_dagwright_call_in_process(server: LiveServer) -> None:
    key = server.api.published_app("cli-inproc", example("hello"))
    runner = CliRunner()
    args = ["call", "cli-inproc", "--url", server.base_url, "--key", key]
    plain = runner.invoke(cli, [*args, "-i", "name=Bo"])
    assert plain.exit_code == 0, plain.output
    assert json.loads(plain.stdout) == {"greeting": "Hello, Bo!"}

    streamed = runner.invoke(cli, [*args, "-i", "name=Cy", "--stream"])
    assert streamed.exit_code == 0, streamed.output
    assert json.loads(streamed.stdout) == {"greeting": "Hello, Cy!"}
    assert "finished  greet" in streamed.stderr

    wrong_key = runner.invoke(cli, ["call", "cli-inproc", "--url", server.base_url, "--key", "x"])
    assert wrong_key.exit_code == 1
    assert "HTTP 401 invalid_api_key" in wrong_key.stderr
    no_key = runner.invoke(cli, ["call", "cli-inproc", "--url", server.base_url])
    assert no_key.exit_code == 2
