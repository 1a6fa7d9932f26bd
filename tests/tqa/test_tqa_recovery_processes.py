"""Background AutoTQA conversations of an embedded server (no queue) that dies, on real
processes: `dagwright serve` on its own PostgreSQL schema, the agents played by the scripted
model (tests/support/tqa_script.yaml: scripted answers, not a model's), each model call taking
`LATENCY_MS`.

The server running a background conversation is killed (SIGKILL) while an agent call is in
flight. Started again, it resumes the conversation after its recorded turns: they are kept
as they were (the Planner is asked once), the call in flight is made again, and the
conversation completes. A server of another name, alive all along, does the same once the
dead one's lease is stale. A conversation whose server processes died too many times ends
failed (`server_lost`); one waiting for an approval is left waiting. A foreground (sync)
conversation of a killed server is ended `server_lost` by the restarted one, which frees its
place under the conversation limit; one of a server stopped with SIGTERM ends cancelled.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from dagwright.llm.scripted.runner import ScriptedServer
from dagwright.tqa.recovery import FOREGROUND_LOST, MAX_ATTEMPTS
from support.server import Api, ServerProcess, postgres_schema
from support.tqa import agents_script, provider_settings

LATENCY_MS = 700  # each scripted model call: a kill finds one in flight
# Two text-to-SQL calls (the first finds nothing, a hint fixes the case): seven model calls.
DEPARTMENT = "Which department does tom work in?"


@dataclass
class Setup:
    url: str
    db: Engine
    model: ScriptedServer
    folder: Path
    servers: list[ServerProcess]

    def server(self, name: str, **env: str) -> ServerProcess:
        """A server of replica `name` (started), its data directory its own, `env` added to
        its environment."""
        folder = self.folder / f"{name}-{len(self.servers)}"
        server = ServerProcess(folder, name, self.url, env=env)
        server.data_dir.mkdir(parents=True, exist_ok=True)
        (server.data_dir / "dagwright.toml").write_text(provider_settings(self.model.base_url))
        self.servers.append(server.start(timeout=120))
        return server

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.db.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def stop_all(self) -> None:
        """Every server still running (a test's servers stop before the next one's)."""
        for server in self.servers:
            server.stop()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    folder = tmp_path_factory.mktemp("tqa-recovery")
    model = ScriptedServer(agents_script(latency_ms=LATENCY_MS)).start()
    try:
        with postgres_schema() as url:
            db = create_engine(url, poolclass=NullPool)
            running = Setup(url, db, model, folder, [])
            try:
                yield running
            finally:
                running.stop_all()
                db.dispose()
    finally:
        model.stop()


@pytest.fixture(autouse=True)
def stopped_after(setup: Setup) -> Iterator[None]:
    """A test's servers are stopped after it, whatever it asserted: a live one would take
    up the next test's conversations."""
    yield
    setup.stop_all()


def ask_async(api: Api, question: str) -> str:
    response = api.http.post("/api/v1/tqa/ask", json={"question": question, "async": True})
    assert response.status_code == 202, response.text
    conversation_id: str = response.json()["id"]
    return conversation_id


def wait_for(
    server: ServerProcess, conversation_id: str, check: Any, timeout: float = 60.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        response = server.api().http.get(f"/api/v1/tqa/conversations/{conversation_id}")
        assert response.status_code == 200, response.text
        found: dict[str, Any] = response.json()
        if check(found):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"not as expected after {timeout}s: {found}\n{server.output()}")
        time.sleep(0.1)


class SyncAsk:
    """A sync (or `stream`ed) ask of `question` in a thread of the test, its caller waiting
    for the answer; `conversation_id` once the server recorded it."""

    def __init__(self, server: ServerProcess, question: str, *, stream: bool = False) -> None:
        self.server = server
        self.response: httpx.Response | None = None
        self.error: Exception | None = None
        before = self._running()
        self._thread = threading.Thread(target=self._ask, args=(question, stream), daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not (started := self._running() - before):
            assert time.monotonic() < deadline, "the conversation was not recorded"
            time.sleep(0.05)
        [self.conversation_id] = started

    def _running(self) -> set[str]:
        response = self.server.api().http.get("/api/v1/tqa/conversations?status=running")
        assert response.status_code == 200, response.text
        return {c["id"] for c in response.json()["items"]}

    def _ask(self, question: str, stream: bool) -> None:
        try:
            with httpx.Client(base_url=self.server.base_url, timeout=120) as http:
                body = {"question": question, "stream": stream}
                self.response = http.post("/api/v1/tqa/ask", json=body)
        except httpx.HTTPError as exc:  # its server died under it
            self.error = exc

    def ended(self) -> None:
        self._thread.join(30)
        assert not self._thread.is_alive()


def killed_mid_call(
    setup: Setup, server: ServerProcess, *, clean: bool = False, sync: bool = False
) -> tuple[str, list[dict[str, Any]]]:
    """A background (`sync`: a sync) conversation asked of `server`, which is killed
    (`clean`: stopped with SIGTERM) once the User's and the Planner's turns are recorded
    (the Engineer's call in flight); its turns then."""
    asked = SyncAsk(server, DEPARTMENT) if sync else None
    conversation_id = (
        ask_async(server.api(), DEPARTMENT) if asked is None else asked.conversation_id
    )
    wait_for(server, conversation_id, lambda c: len(c["turns"]) >= 2)
    # Killed once the Engineer's run is recorded running (runs are written in group
    # commits: a kill a moment earlier would leave no trace of the call in flight).
    deadline = time.monotonic() + 30
    while not setup.scalar(
        "SELECT count(*) FROM runs r JOIN apps a ON a.id = r.app_id "
        "WHERE a.slug = 'autotqa-engineer' AND r.status = 'running' AND r.created_at >= "
        "(SELECT created_at FROM tqa_conversations WHERE id = :id)",
        id=conversation_id,
    ):
        assert time.monotonic() < deadline, "the Engineer's call did not start"
        time.sleep(0.02)
    if clean:
        server.stop()
    else:
        server.kill()
    if asked is not None:
        asked.ended()
        assert asked.error is not None  # its caller's request died with the server
    kept = recorded_turns(setup, conversation_id)
    assert [t["agent"] for t in kept] == ["User", "Planner"]
    status = setup.scalar("SELECT status FROM tqa_conversations WHERE id = :id", id=conversation_id)
    assert status == "running"
    return conversation_id, kept


def recorded_turns(setup: Setup, conversation_id: str) -> list[dict[str, Any]]:
    with setup.db.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT seq, agent, text, run_id FROM tqa_turns WHERE conversation_id = :id "
                "ORDER BY seq"
            ),
            {"id": conversation_id},
        ).all()
    return [{"seq": r[0], "agent": r[1], "text": r[2], "run_id": r[3]} for r in rows]


def assert_completed_after(
    setup: Setup,
    done: dict[str, Any],
    kept: list[dict[str, Any]],
    lost_as: str = "interrupted",
) -> None:
    assert done["status"] == "completed", done
    assert done["answer"]["value"] == "FINANCE"
    turns = done["turns"]
    assert [t["seq"] for t in turns] == list(range(len(turns)))
    assert [t["agent"] for t in turns] == [
        "User",
        "Planner",
        "Engineer",
        "Executor",
        "Engineer",
        "Executor",
        "Engineer",
        "Critic",
    ]
    # The turns recorded before the kill are the same turns (same runs), not run again.
    for old, new in zip(kept, turns[:2], strict=True):
        assert (old["text"], old["run_id"]) == (new["text"], new["run_id"])
    by_rule = setup.model.stats()["by_rule"]
    assert by_rule["planner"] == 1  # asked once: its turn was reused
    assert by_rule["critic-department"] == 1
    # The Engineer's call in flight at the kill was made again: one run more than its turns,
    # the lost one closed (soon, by whichever server recovers the dead process's runs).
    recorded = [t["run_id"] for t in turns if t["agent"] == "Engineer"]
    since = datetime.fromisoformat(done["created_at"])
    deadline = time.monotonic() + 30
    while True:
        with setup.db.connect() as conn:
            statuses = conn.execute(
                text(
                    "SELECT r.id, r.status FROM runs r JOIN apps a ON a.id = r.app_id "
                    "WHERE a.slug = 'autotqa-engineer' AND r.created_at >= :since"
                ),
                {"since": since},
            ).all()
        assert len(statuses) == len(recorded) + 1, statuses
        lost = [status for run_id, status in statuses if run_id not in recorded]
        if lost == [lost_as] or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert lost == [lost_as]


def test_a_killed_servers_conversation_resumes_when_it_restarts(setup: Setup) -> None:
    setup.model.reset()
    server = setup.server("api-1")
    conversation_id, kept = killed_mid_call(setup, server)
    server.start(timeout=120)  # the same replica, another process (its lease is another)
    done = wait_for(server, conversation_id, lambda c: c["status"] != "running", timeout=90)
    assert_completed_after(setup, done, kept)
    attempts = setup.scalar(
        "SELECT attempts FROM tqa_conversations WHERE id = :id", id=conversation_id
    )
    assert attempts == 2  # the killed process, then the restarted one
    assert f"conversation {conversation_id}: its server process" in server.output()


def test_a_stopped_servers_conversation_is_handed_over_and_no_death(setup: Setup) -> None:
    """SIGTERM: the server cuts the conversation short, leaves it running and releases its
    lease; restarted, it goes on. A clean stop does not count toward MAX_ATTEMPTS."""
    setup.model.reset()
    server = setup.server("api-4")
    conversation_id, kept = killed_mid_call(setup, server, clean=True)
    server.start(timeout=120)
    done = wait_for(server, conversation_id, lambda c: c["status"] != "running", timeout=90)
    # The call in flight was cancelled by the stop (its run recorded so), not lost.
    assert_completed_after(setup, done, kept, lost_as="cancelled")
    attempts = setup.scalar(
        "SELECT attempts FROM tqa_conversations WHERE id = :id", id=conversation_id
    )
    assert attempts == 1  # the restarted process only: the stop was no death


def test_a_live_server_resumes_the_conversation_of_a_dead_one(setup: Setup) -> None:
    """Another replica, alive all along, takes it up once the dead one's lease is stale
    (its pid means nothing to a replica of another name)."""
    setup.model.reset()
    survivor = setup.server("api-survivor")
    doomed = setup.server("api-doomed")
    conversation_id, kept = killed_mid_call(setup, doomed)
    done = wait_for(survivor, conversation_id, lambda c: c["status"] != "running", timeout=90)
    assert_completed_after(setup, done, kept)
    replica = setup.scalar(
        "SELECT replica FROM tqa_conversations WHERE id = :id", id=conversation_id
    )
    holder = setup.scalar("SELECT name FROM replicas WHERE id = :id", id=replica)
    assert holder == "api-survivor"


def test_a_conversation_whose_servers_keep_dying_ends_failed(setup: Setup) -> None:
    """As if its server processes had died MAX_ATTEMPTS - 1 times already: the one running it
    dies once more, and the restarted server ends it failed instead of resuming it."""
    setup.model.reset()
    server = setup.server("api-2")
    conversation_id = ask_async(server.api(), DEPARTMENT)
    wait_for(server, conversation_id, lambda c: len(c["turns"]) >= 2)
    with setup.db.begin() as conn:
        conn.execute(
            text("UPDATE tqa_conversations SET attempts = :n WHERE id = :id"),
            {"n": MAX_ATTEMPTS, "id": conversation_id},
        )
    server.kill()
    server.start(timeout=120)
    done = wait_for(server, conversation_id, lambda c: c["status"] != "running", timeout=30)
    assert done["status"] == "failed", done
    assert done["error"]["code"] == "server_lost"
    assert f"stopped {MAX_ATTEMPTS} times" in done["error"]["message"]
    assert [t["agent"] for t in done["turns"]][:2] == ["User", "Planner"]  # kept
    time.sleep(2 * LATENCY_MS / 1000)
    after = server.api().http.get(f"/api/v1/tqa/conversations/{conversation_id}").json()
    assert len(after["turns"]) == len(done["turns"])  # nothing ran on


def test_a_waiting_conversation_of_a_killed_server_is_left_waiting(setup: Setup) -> None:
    """No process holds a conversation waiting for an approval: a restart leaves it as it is,
    and the approval lets it go on on the new process."""
    setup.model.reset()
    server = setup.server("api-3")
    api = server.api()
    marked = api.http.put(
        "/api/v1/tqa/tools/python_on_tables/approval", json={"requires_approval": True}
    )
    assert marked.status_code == 200, marked.text
    try:
        conversation_id = ask_async(api, "What is the total bonus of all employees?")
        waiting = wait_for(server, conversation_id, lambda c: c["status"] == "waiting")
        server.kill()
        server.start(timeout=120)
        time.sleep(1.0)  # the restarted server's first sweep has run
        still = wait_for(server, conversation_id, lambda c: True)
        assert still["status"] == "waiting"
        assert len(still["turns"]) == len(waiting["turns"])
        assert still["error"] is None
        params = {"conversation_id": conversation_id}
        [request] = api.http.get("/api/v1/human/requests", params=params).json()["items"]
        answered = api.http.post(
            f"/api/v1/human/requests/{request['id']}/answer", json={"choice": "approve"}
        )
        assert answered.status_code == 202, answered.text
        done = wait_for(server, conversation_id, lambda c: c["status"] == "completed")
        assert done["answer"]["value"] == 3669
    finally:
        api.http.put(
            "/api/v1/tqa/tools/python_on_tables/approval", json={"requires_approval": False}
        )


def test_a_killed_servers_sync_conversation_ends_and_frees_its_place(setup: Setup) -> None:
    """Its caller's request died with the server: the restarted server ends the conversation
    `server_lost` (turns kept) instead of resuming it, and, the limit being one
    conversation, a new question is admitted (before, it was refused for good)."""
    setup.model.reset()
    server = setup.server("api-5", DAGWRIGHT_TQA_MAX_CONVERSATIONS="1")
    conversation_id, kept = killed_mid_call(setup, server, sync=True)
    server.start(timeout=120)
    done = wait_for(server, conversation_id, lambda c: c["status"] != "running", timeout=30)
    assert done["status"] == "failed", done
    assert done["error"] == {"code": "server_lost", "message": FOREGROUND_LOST}
    # The turns recorded before the kill are kept as they were; nothing ran on.
    assert [{k: t[k] for k in ("seq", "agent", "text", "run_id")} for t in done["turns"]] == kept
    assert setup.model.stats()["by_rule"]["planner"] == 1
    answered = server.api().http.post("/api/v1/tqa/ask", json={"question": DEPARTMENT}, timeout=90)
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "completed"


def test_a_stopped_servers_foreground_conversations_end_cancelled(setup: Setup) -> None:
    """SIGTERM with a sync and a streamed conversation in flight that outlast uvicorn's grace
    period (the Critic is never satisfied): both end `cancelled` as the server stops, none
    is left running."""
    setup.model.reset()
    server = setup.server("api-6")
    asked = [
        SyncAsk(server, "Count the employees forever"),
        SyncAsk(server, "Count the employees forever", stream=True),
    ]
    for ask in asked:
        wait_for(server, ask.conversation_id, lambda c: len(c["turns"]) >= 3)
    server.stop()
    assert server.process is not None
    assert server.process.returncode != -signal.SIGKILL  # it stopped by itself
    for ask in asked:
        ask.ended()
        status, error = setup.scalar(
            "SELECT json_build_array(status, error) FROM tqa_conversations WHERE id = :id",
            id=ask.conversation_id,
        )
        assert (status, error["code"]) == ("failed", "cancelled"), (status, error)
