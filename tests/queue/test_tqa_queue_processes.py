"""AutoTQA conversations in queue mode, on real processes: two API servers and workers on one
PostgreSQL schema, the agents played by the scripted model (tests/support/tqa_script.yaml,
every answer scripted, not a model's), each model call taking `LATENCY_MS`.

An async question asked through one server is a job a worker runs; its turns show on the
other server as they are recorded. The worker running it is killed (SIGKILL) while an agent
call is in flight: another worker resumes the conversation after its recorded turns — the
turns recorded before the kill are kept as they were (the Planner is asked once), the call in
flight is made again — and the conversation completes. A cancel sent through either server
reaches the worker running the conversation.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from dagwright.llm.scripted.runner import ScriptedServer
from support.server import Api, ServerProcess, WorkerProcess, postgres_schema
from support.tqa import agents_script, provider_settings

LATENCY_MS = 700  # each scripted agent or tool model call
# Seconds of silence after which a worker is taken for dead: well above the pauses of a busy
# worker on these shared 2 cores, where 5 s took a live one for dead (its conversation was
# then taken over, correctly, but the Planner was asked twice).
STALLED_AFTER = 10.0
# Two text-to-SQL calls (the first finds nothing, a hint fixes the case): seven model calls.
DEPARTMENT = "Which department does tom work in?"


@dataclass
class Cluster:
    url: str
    db: Engine
    model: ScriptedServer
    servers: list[ServerProcess]
    workers: list[WorkerProcess]
    env: dict[str, str]
    folder: Path

    def api(self, index: int) -> Api:
        return self.servers[index].api()

    def add_worker(self, name: str) -> WorkerProcess:
        worker = WorkerProcess(self.folder / name, name, self.url, env=self.env)
        _configure(worker.data_dir, self.model)
        self.workers.append(worker.start())
        return worker

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.db.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def worker_running(self, app: str, timeout: float = 60.0) -> WorkerProcess:
        """The worker running a run of `app` (a LIKE pattern), as soon as one runs (by its
        replica lease)."""
        deadline = time.monotonic() + timeout
        while True:
            name = self.scalar(
                "SELECT l.name FROM runs r JOIN apps a ON a.id = r.app_id JOIN replicas l "
                "ON l.id = r.replica WHERE a.slug LIKE :app AND r.status = 'running'",
                app=app,
            )
            if name is not None:
                return next(w for w in self.workers if w.replica == name)
            assert time.monotonic() < deadline, f"no run of {app} after {timeout}s"
            time.sleep(0.05)

    def wait_for(self, api: Api, conversation_id: str, check: Any, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            response = api.http.get(f"/api/v1/tqa/conversations/{conversation_id}")
            assert response.status_code == 200, response.text
            found = response.json()
            if check(found):
                return found
            if time.monotonic() > deadline:
                logs = "\n".join(w.output()[-3000:] for w in self.workers)
                raise AssertionError(f"not as expected after {timeout}s: {found}\n{logs}")
            time.sleep(0.1)


def _configure(data_dir: Path, model: ScriptedServer) -> None:
    """The process's dagwright.toml (read in its data directory): the scripted agents."""
    data_dir.mkdir(parents=True, exist_ok=True)
    (data_dir / "dagwright.toml").write_text(provider_settings(model.base_url))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("tqa-queue")
    env = {
        "DAGWRIGHT_QUEUE": "procrastinate",
        "DAGWRIGHT_WORKER_HEARTBEAT": "0.5",
        "DAGWRIGHT_WORKER_STALLED_AFTER": str(STALLED_AFTER),
        "DAGWRIGHT_SECRET_KEY": Fernet.generate_key().decode(),
    }
    model = ScriptedServer(agents_script(latency_ms=LATENCY_MS)).start()
    try:
        with postgres_schema() as url:
            db = create_engine(url, poolclass=NullPool)
            servers: list[ServerProcess] = []
            running = Cluster(url, db, model, servers, [], env, folder)
            try:
                # One after the other: the first migrates the schema and installs the queue.
                for name in ("api-1", "api-2"):
                    server = ServerProcess(folder / name, name, url, env=env)
                    _configure(server.data_dir, model)
                    servers.append(server.start(timeout=120))
                for name in ("worker-1", "worker-2"):
                    running.add_worker(name)
                yield running
            finally:
                for process in [*running.workers, *servers]:
                    process.stop()
                db.dispose()
    finally:
        model.stop()


def ask_async(api: Api, question: str) -> str:
    response = api.http.post("/api/v1/tqa/ask", json={"question": question, "async": True})
    assert response.status_code == 202, response.text
    conversation_id: str = response.json()["id"]
    return conversation_id


def test_a_conversation_resumes_on_another_worker_after_a_kill(cluster: Cluster) -> None:
    first, second = cluster.api(0), cluster.api(1)
    conversation_id = ask_async(first, DEPARTMENT)
    # Its turns show through the other server as they are recorded.
    cluster.wait_for(second, conversation_id, lambda c: len(c["turns"]) >= 2)
    # Killed while the Executor's first tool call is in flight.
    cluster.worker_running("autotqa-executor").kill()
    before = second.http.get(f"/api/v1/tqa/conversations/{conversation_id}").json()
    assert before["status"] == "running"
    kept = before["turns"]
    assert [t["agent"] for t in kept] == ["User", "Planner", "Engineer"]
    # Another worker (the survivor, or one started now) takes the job up and resumes.
    cluster.add_worker("worker-3")
    done = cluster.wait_for(first, conversation_id, lambda c: c["status"] != "running", timeout=90)
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
    for old, new in zip(kept, turns[:3], strict=True):
        assert (old["text"], old["run_id"]) == (new["text"], new["run_id"])
    by_rule = cluster.model.stats()["by_rule"]
    assert by_rule["planner"] == 1  # asked once: its turn was reused
    assert by_rule["critic-department"] == 1
    # Three Executor calls for two tool turns: the one in flight at the kill was made again.
    executor_runs = cluster.scalar(
        "SELECT count(*) FROM runs r JOIN apps a ON a.id = r.app_id "
        "WHERE a.slug = 'autotqa-executor'"
    )
    assert executor_runs == 3
    recorded = {t["run_id"] for t in turns if t["agent"] == "Executor"}
    lost = cluster.scalar(
        "SELECT status FROM runs r JOIN apps a ON a.id = r.app_id "
        "WHERE a.slug = 'autotqa-executor' AND r.id <> ALL(:ids)",
        ids=list(recorded),
    )
    assert lost in ("interrupted", "running")  # the dead worker's call, never reused


def test_a_cancel_through_either_server_reaches_the_worker(cluster: Cluster) -> None:
    first, second = cluster.api(0), cluster.api(1)
    conversation_id = ask_async(first, "Count the employees forever")
    cluster.wait_for(first, conversation_id, lambda c: len(c["turns"]) >= 2)
    response = second.http.post(f"/api/v1/tqa/conversations/{conversation_id}/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["cancel_requested"] is True
    done = cluster.wait_for(first, conversation_id, lambda c: c["status"] != "running", 20)
    assert done["status"] == "failed"
    assert done["error"]["code"] == "cancelled"
    assert done["cancel_requested_at"] is not None
    settled = len(done["turns"])
    time.sleep(2 * LATENCY_MS / 1000)
    after = first.http.get(f"/api/v1/tqa/conversations/{conversation_id}").json()
    assert len(after["turns"]) == settled  # nothing ran on after the cancel


def test_an_approval_answered_on_either_server_lets_a_worker_go_on(cluster: Cluster) -> None:
    first, second = cluster.api(0), cluster.api(1)
    marked = first.http.put(
        "/api/v1/tqa/tools/python_on_tables/approval", json={"requires_approval": True}
    )
    assert marked.status_code == 200, marked.text
    conversation_id = ask_async(first, "What is the total bonus of all employees?")
    waiting = cluster.wait_for(second, conversation_id, lambda c: c["status"] == "waiting")
    assert [t["agent"] for t in waiting["turns"]] == ["User", "Planner", "Engineer"]
    # A waiting conversation holds no job: no worker is busy with it.
    jobs = cluster.scalar(
        "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing' "
        "AND args->>'conversation_id' = :id",
        id=conversation_id,
    )
    assert jobs == 0
    params = {"conversation_id": conversation_id}
    [request] = second.http.get("/api/v1/human/requests", params=params).json()["items"]
    # The worker had the tool write its program first: the request shows it.
    plan = request["form"]["approval"]["plan"]
    assert plan["code"] == "result = int(df.Bonus.sum())"  # the scripted model's
    answered = second.http.post(
        f"/api/v1/human/requests/{request['id']}/answer", json={"choice": "approve"}
    )
    assert answered.status_code == 202, answered.text
    done = cluster.wait_for(first, conversation_id, lambda c: c["status"] == "completed")
    assert done["answer"]["value"] == 3669
    assert done["turns"][3]["content"]["approval"]["approved"] is True
    # Whichever worker went on ran the approved program as it is.
    assert done["turns"][3]["tool_call"]["input"]["plan"] == plan
    assert done["turns"][3]["tool_call"]["outputs"]["code"] == plan["code"]


def test_a_worker_taken_for_dead_stops_and_leaves_a_job_behind(cluster: Cluster) -> None:
    """A worker frozen (SIGSTOP) past STALLED_AFTER is taken for dead: another takes the
    conversation up. Thawed, the first stops at its next turn without writing it and, as
    it finishes the job they shared, queues another; so when the second worker then dies
    too, the conversation is still resumed and completes."""
    api = cluster.api(0)
    conversation_id = ask_async(api, DEPARTMENT)
    cluster.wait_for(api, conversation_id, lambda c: len(c["turns"]) >= 2)
    runner = cluster.scalar(
        "SELECT runner FROM tqa_conversations WHERE id = :id", id=conversation_id
    )
    frozen = cluster.worker_running("autotqa-%")
    assert frozen.process is not None
    frozen.process.send_signal(signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 3 * STALLED_AFTER
        while (
            cluster.scalar(
                "SELECT runner FROM tqa_conversations WHERE id = :id", id=conversation_id
            )
            == runner
        ):
            assert time.monotonic() < deadline, "no worker took the conversation over"
            time.sleep(0.2)
    finally:
        frozen.process.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + 30
    while "was taken up by another process" not in frozen.output():
        assert time.monotonic() < deadline, frozen.output()[-3000:]
        time.sleep(0.2)
    cluster.worker_running("autotqa-%").kill()
    done = cluster.wait_for(api, conversation_id, lambda c: c["status"] != "running", 90)
    assert done["status"] == "completed", done
    assert done["answer"]["value"] == "FINANCE"
    turns = done["turns"]
    assert [t["seq"] for t in turns] == list(range(len(turns)))
    assert [t["agent"] for t in turns][-2:] == ["Engineer", "Critic"]


def test_a_conversation_whose_workers_keep_dying_ends_failed(cluster: Cluster) -> None:
    """Its job as if its workers had died MAX_ATTEMPTS - 1 times already; the worker running
    it dies once more: the sweep ends the conversation failed instead of retrying it."""
    api = cluster.api(0)
    conversation_id = ask_async(api, DEPARTMENT)
    begun = cluster.wait_for(api, conversation_id, lambda c: len(c["turns"]) >= 2)
    # The worker running it ran its Planner (agents run in the conversation's process); an
    # earlier test's lost runs may still show as running on other workers.
    holder = cluster.scalar(
        "SELECT l.name FROM runs r JOIN replicas l ON l.id = r.replica WHERE r.id = :id",
        id=begun["turns"][1]["run_id"],
    )
    worker = next(w for w in cluster.workers if w.replica == holder)
    jobs = (
        "FROM procrastinate_jobs WHERE args->>'conversation_id' = :c AND status = 'doing' "
        "AND task_name = 'dagwright.converse'"
    )
    assert cluster.scalar(f"SELECT count(*) {jobs}", c=conversation_id) == 1
    with cluster.db.begin() as conn:  # the sweep's count (services/queue/deaths.py)
        conn.execute(
            text(
                f"INSERT INTO dagwright_job_deaths (job_id, deaths) SELECT id, 4 {jobs} "
                "ON CONFLICT (job_id) DO UPDATE SET deaths = excluded.deaths"
            ),
            {"c": conversation_id},
        )
    worker.kill()
    cluster.workers.remove(worker)
    cluster.add_worker("worker-given-up")
    done = cluster.wait_for(api, conversation_id, lambda c: c["status"] != "running", 90)
    assert done["status"] == "failed", done
    assert done["error"]["code"] == "worker_lost"
    assert "died 5 times" in done["error"]["message"]
    assert [t["agent"] for t in done["turns"]][:2] == ["User", "Planner"]  # kept
    queued = cluster.scalar(
        "SELECT count(*) FROM procrastinate_jobs WHERE args->>'conversation_id' = :c "
        "AND status IN ('todo', 'doing')",
        c=conversation_id,
    )
    assert queued == 0
