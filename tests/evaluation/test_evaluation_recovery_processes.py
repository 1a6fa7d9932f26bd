"""Evaluations run by real processes on one PostgreSQL schema (issue 30, item 5): a server
killed (SIGKILL) mid-evaluation leaves it to the next server that starts, which resumes it
(every example with a result is not run again: the runs are counted); a second process asked
to run an evaluation another live process holds refuses (`evaluation_held`), the command line
as the API, and runs nothing.

The app is `slow_echo` behind a template (tests/support/server_blocks): no model, each
example SECONDS long, so that a kill lands while an example runs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from support.server import Api, ServerProcess, postgres_schema, slow_flow, subprocess_environment

EXAMPLES = 8
SECONDS = 0.6


@dataclass
class Setup:
    url: str
    db: Engine
    folder: Path
    servers: list[ServerProcess]

    def server(self, name: str) -> ServerProcess:
        """A server of replica `name`, started; the same name gets the same data directory
        (a restarted server)."""
        server = ServerProcess(self.folder / name, name, self.url)
        self.servers.append(server.start(timeout=120))
        return server

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.db.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.db.connect() as conn:
            return list(conn.execute(text(sql), params).all())


@pytest.fixture
def setup(tmp_path: Path) -> Iterator[Setup]:
    with postgres_schema() as url:
        db = create_engine(url, poolclass=NullPool)
        running = Setup(url, db, tmp_path, [])
        try:
            yield running
        finally:
            for server in running.servers:
                server.stop()
            db.dispose()


def _slow_app_and_dataset(
    api: Api, name: str, examples: int = EXAMPLES, seconds: float = SECONDS
) -> None:
    """App `name` answers `quick:<question>` after `seconds`; dataset `name` of `examples`
    questions whose gold is that answer."""
    api.published_app(name, slow_flow(seconds, "question"))
    body = "".join(
        json.dumps({"id": f"e{i}", "question": f"q{i}", "answer": f"quick:q{i}"}) + "\n"
        for i in range(examples)
    )
    response = api.http.post(
        f"/api/v1/datasets/{name}/upload",
        params={"kind": "generic", "format": "jsonl", "metric": "numeric"},
        content=body.encode(),
    )
    assert response.status_code == 201, response.text


def _start(api: Api, name: str, concurrency: int) -> dict[str, Any]:
    response = api.http.post(
        "/api/v1/evaluations",
        json={"app": name, "dataset": name, "output": "value", "concurrency": concurrency},
    )
    return {**response.json(), "http": response.status_code}


def _until(check: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not {what} after {timeout} s")
        time.sleep(0.02)


def _results(setup: Setup, evaluation_id: str) -> int:
    return int(
        setup.scalar("SELECT count(*) FROM eval_results WHERE evaluation_id = :e", e=evaluation_id)
    )


def _runs_by_status(setup: Setup) -> dict[str, int]:
    rows = setup.rows("SELECT status, count(*) FROM runs WHERE mode = 'eval' GROUP BY status")
    return {str(status): int(count) for status, count in rows}


def test_a_killed_servers_evaluation_is_resumed_by_the_next_one(setup: Setup) -> None:
    server = setup.server("eval-a")
    api = server.api()
    _slow_app_and_dataset(api, "slowcount")
    started = _start(api, "slowcount", concurrency=1)
    assert started["http"] == 202, started
    evaluation_id = started["id"]
    _until(lambda: _results(setup, evaluation_id) >= 3, "three results")
    server.kill()  # an example runs: its run is in flight
    before = _results(setup, evaluation_id)
    assert before < EXAMPLES
    assert setup.scalar("SELECT status FROM evaluations WHERE id = :e", e=evaluation_id) == (
        "running"
    )

    setup.server("eval-a")  # restarted: the dead process's lease is gone at once
    _until(
        lambda: (
            setup.scalar("SELECT status FROM evaluations WHERE id = :e", e=evaluation_id)
            == "completed"
        ),
        "completed",
    )
    assert _results(setup, evaluation_id) == EXAMPLES
    # Every example ran to the end once: the one in flight at the kill was interrupted and
    # ran again, none of those with a result did.
    # (The in-flight one's run is interrupted when its start reached the database before the
    # kill; the run writer may not have written it yet.)
    runs = _runs_by_status(setup)
    assert runs.pop("succeeded") == EXAMPLES, runs
    assert runs in ({}, {"interrupted": 1}), runs
    referenced = setup.scalar(
        "SELECT count(DISTINCT run_id) FROM eval_results WHERE evaluation_id = :e", e=evaluation_id
    )
    assert referenced == EXAMPLES
    row = setup.rows(
        "SELECT replica, attempts, aggregate FROM evaluations WHERE id = :e", e=evaluation_id
    )[0]
    assert row[0] is None  # let go once complete
    assert row[1] == 2  # the first server, then the one that took it over
    aggregate = json.loads(row[2]) if isinstance(row[2], str) else row[2]
    assert aggregate["accuracy"] == 1.0


def _eval_run_command(setup: Setup, name: str, folder: Path) -> subprocess.CompletedProcess[str]:
    folder.mkdir(parents=True, exist_ok=True)
    env = subprocess_environment(DAGWRIGHT_DATA_DIR=str(folder), DAGWRIGHT_DATABASE_URL=setup.url)
    command = ["eval", "run", name, "--dataset", name, "--output", "value", "--json"]
    return subprocess.run(
        [sys.executable, "-m", "dagwright", *command],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=folder,
        env=env,
    )


def test_a_second_process_refuses_an_evaluation_another_holds(setup: Setup) -> None:
    a = setup.server("hold-a")
    b = setup.server("hold-b")
    # Long enough (20 x 1 s, two at a time) for a command and a server to ask meanwhile.
    _slow_app_and_dataset(a.api(), "held", examples=20, seconds=1.0)
    started = _start(a.api(), "held", concurrency=2)
    assert started["http"] == 202, started
    evaluation_id = started["id"]
    _until(lambda: _results(setup, evaluation_id) >= 1, "a result")

    # The command line resumes the unfinished evaluation of the same version: it is held.
    refused = _eval_run_command(setup, "held", setup.folder / "cli")
    assert refused.returncode == 2, refused.stderr
    assert "error [evaluation_held]" in refused.stderr
    assert f"evaluation {evaluation_id} is running in another process ('hold-a'" in (refused.stderr)

    # Another server, through the API: 409 naming the holder.
    again = _start(b.api(), "held", concurrency=2)
    assert again["http"] == 409, again
    assert again["error"]["code"] == "evaluation_held"
    assert "'hold-a'" in again["error"]["message"]

    _until(
        lambda: (
            setup.scalar("SELECT status FROM evaluations WHERE id = :e", e=evaluation_id)
            == "completed"
        ),
        "completed",
    )
    assert _results(setup, evaluation_id) == 20
    assert _runs_by_status(setup) == {"succeeded": 20}  # nothing ran twice
    assert setup.scalar("SELECT count(*) FROM evaluations") == 1
