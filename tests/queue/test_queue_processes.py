"""Queue mode on real processes: two API servers and two workers on one PostgreSQL schema.

200 async runs queued through both servers spread over both workers; one worker is killed
(SIGKILL) in the middle and every run still finishes, on the other: no node recorded as
finished runs again, no not-retryable block runs twice. A run whose not-retryable block was
running when its worker died fails with `not_retryable` on a restarted worker instead of
calling it again. A cancel sent through either server reaches a run on any worker.

Each call of the test blocks (`tally`, `tally_once`, support/server_blocks/tally.py) appends
"<run id> <node>" to one file, so the tests count how often each node really ran.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from dagwright.services.queue.worker import MAX_ATTEMPTS
from support.server import (
    Api,
    ServerProcess,
    WorkerProcess,
    edge,
    error_of,
    flow,
    node,
    postgres_schema,
)

RUNS = 200
TALLIED = ("a", "s", "b")  # the nodes of tally_flow that count their calls
STALLED_AFTER = 3.0  # seconds of silence after which a worker is taken for dead
SHUTDOWN_GRACE = 6.0  # seconds a stopping worker lets its runs finish before handing them over


@dataclass
class Cluster:
    url: str
    db: Engine
    tally: Path
    servers: list[ServerProcess]
    workers: list[WorkerProcess]
    env: dict[str, str]
    folder: Path

    def api(self, index: int) -> Api:
        return self.servers[index].api()

    def add_worker(self, name: str, **env: str) -> WorkerProcess:
        """A worker with the cluster's settings (those in `env` changed)."""
        worker = WorkerProcess(self.folder / name, name, self.url, env={**self.env, **env})
        worker.start()
        self.workers.append(worker)
        return worker

    def counts(self) -> Counter[tuple[str, str]]:
        """How often each (run, node) was called."""
        lines = self.tally.read_text().splitlines() if self.tally.exists() else []
        return Counter((run, node) for run, node in (line.split(" ", 1) for line in lines))

    def scalar(self, sql: str, **params: Any) -> Any:
        with self.db.connect() as conn:
            return conn.execute(text(sql), params).scalar()

    def rows(self, sql: str, **params: Any) -> list[Any]:
        with self.db.connect() as conn:
            return list(conn.execute(text(sql), params).all())

    def leases_of(self, replica: str) -> set[str]:
        rows = self.rows("SELECT id FROM replicas WHERE name = :name", name=replica)
        return {row[0] for row in rows}

    def wait_for(self, what: str, check: Any, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                logs = "\n".join(w.output()[-3000:] for w in self.workers)
                raise AssertionError(f"{what}: not after {timeout}s\n{logs}")
            time.sleep(0.1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("queue")
    env = {
        "DAGWRIGHT_QUEUE": "procrastinate",
        "DAGWRIGHT_WORKER_CONCURRENCY": "25",
        "DAGWRIGHT_WORKER_HEARTBEAT": "0.5",
        "DAGWRIGHT_WORKER_STALLED_AFTER": str(STALLED_AFTER),
        "DAGWRIGHT_WORKER_POLL_INTERVAL": "0.5",
        "DAGWRIGHT_WORKER_SHUTDOWN_GRACE": str(SHUTDOWN_GRACE),
        "DAGWRIGHT_QUEUE_EVALUATION_CHUNK": "1",
        # Every process decrypts the same secrets (as docker-compose.yml shares the key).
        "DAGWRIGHT_SECRET_KEY": Fernet.generate_key().decode(),
    }
    with postgres_schema() as url:
        db = create_engine(url, poolclass=NullPool)
        # One after the other: the first migrates the schema and installs the queue's tables.
        servers = [
            ServerProcess(folder / name, name, url, env=env).start(timeout=120)
            for name in ("api-1", "api-2")
        ]
        running = Cluster(url, db, folder / "tally.log", servers, [], env, folder)
        try:
            for name in ("worker-1", "worker-2"):
                running.add_worker(name)
            running.wait_for(
                "two workers registered",
                lambda: running.scalar("SELECT count(*) FROM procrastinate_workers") >= 2,
            )
            yield running
        finally:
            for process in [*running.workers, *servers]:
                process.stop()
            db.dispose()


def tally_flow(tally: Path, seconds: float, once_seconds: float = 0.0) -> dict[str, Any]:
    """input -> a: tally -> s: tally (waits) -> b: tally_once -> output `value`."""
    return flow(
        [
            node("inp", "text_input", name="value"),
            node("a", "tally", file=str(tally)),
            node("s", "tally", file=str(tally), seconds=seconds),
            node("b", "tally_once", file=str(tally), seconds=once_seconds),
            node("out", "output", name="value"),
        ],
        [edge("inp", "a"), edge("a", "s"), edge("s", "b"), edge("b", "out")],
        name="tallied",
    )


def queue_run(api: Api, slug: str, key: str, value: str) -> str:
    response = api.run(slug, key, {"value": value}, **{"async": True})
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["status"] == "queued"
    run_id: str = body["run_id"]
    return run_id


def test_runs_survive_a_killed_worker(cluster: Cluster) -> None:
    first, second = cluster.api(0), cluster.api(1)
    key = first.published_app("spread", tally_flow(cluster.tally, seconds=1.5))
    run_ids = [queue_run((first, second)[i % 2], "spread", key, f"v{i}") for i in range(RUNS)]
    victim = cluster.workers[0]

    # In the middle: some runs finished, and the victim is running some.
    cluster.wait_for(
        "runs finished on both workers and running on worker-1",
        lambda: (
            cluster.scalar("SELECT count(*) FROM runs WHERE status = 'succeeded'") >= 40
            and cluster.scalar(
                "SELECT count(*) FROM runs r JOIN replicas l ON l.id = r.replica "
                "WHERE r.status = 'running' AND l.name = 'worker-1'"
            )
            > 0
        ),
    )
    victim.kill()
    # What was recorded as finished when it died, and which runs it had in hand.
    finished_before = {
        (row[0], row[1])
        for row in cluster.rows("SELECT run_id, node FROM run_nodes WHERE status = 'succeeded'")
    }
    in_hand = {
        row[0]
        for row in cluster.rows(
            "SELECT r.id FROM runs r JOIN replicas l ON l.id = r.replica "
            "WHERE r.status = 'running' AND l.name = 'worker-1'"
        )
    }
    ran_on = Counter(
        row[0]
        for row in cluster.rows(
            "SELECT l.name FROM runs r JOIN replicas l ON l.id = r.replica "
            "WHERE r.status IN ('running', 'succeeded')"
        )
    )
    assert in_hand
    assert ran_on["worker-1"] > 0, ran_on
    assert ran_on["worker-2"] > 0, ran_on

    def all_final() -> bool:
        return (
            cluster.scalar(
                "SELECT count(*) FROM runs WHERE id = ANY(:ids) "
                "AND status NOT IN ('queued', 'running')",
                ids=run_ids,
            )
            == RUNS
        )

    cluster.wait_for("every run final", all_final, timeout=120)
    statuses = dict(cluster.rows("SELECT id, status FROM runs WHERE id = ANY(:ids)", ids=run_ids))
    errors = dict(
        cluster.rows(
            "SELECT id, error->>'code' FROM runs WHERE id = ANY(:ids) AND status <> 'succeeded'",
            ids=run_ids,
        )
    )
    # A run can only fail for having been inside its not-retryable block at the crash.
    assert set(errors.values()) <= {"not_retryable"}, errors
    assert Counter(statuses.values())["succeeded"] >= RUNS - len(in_hand)
    counts = cluster.counts()
    for run_id in run_ids:
        assert counts[run_id, "b"] <= 1, f"tally_once of {run_id} ran twice"
        if statuses[run_id] == "succeeded":
            assert counts[run_id, "a"] >= 1
            assert counts[run_id, "s"] >= 1
            assert counts[run_id, "b"] == 1
    for run_id, node_id in finished_before:
        if run_id in statuses and node_id in TALLIED:
            assert counts[run_id, node_id] == 1, f"{run_id}/{node_id} finished, then ran again"
    # The victim's runs finished on the survivor, reusing what they had recorded.
    resumed = [run for run in in_hand if statuses[run] == "succeeded"]
    assert resumed
    survivor = cluster.leases_of("worker-2")
    owners = dict(cluster.rows("SELECT id, replica FROM runs WHERE id = ANY(:ids)", ids=resumed))
    assert set(owners.values()) <= survivor
    # Back to two workers for the tests that follow.
    cluster.workers.remove(victim)
    cluster.add_worker("worker-3")


def test_a_not_retryable_block_caught_by_a_crash_fails_the_run(cluster: Cluster) -> None:
    api = cluster.api(1)
    key = api.published_app("once", tally_flow(cluster.tally, seconds=0, once_seconds=60))
    run_id = queue_run(api, "once", key, "x")
    # tally_once is recorded as begun before it is called; then kill whichever worker has it.
    cluster.wait_for(
        "tally_once begun",
        lambda: cluster.scalar(
            "SELECT count(*) FROM run_nodes WHERE run_id = :run AND node = 'b' "
            "AND status = 'running'",
            run=run_id,
        ),
    )
    owner = cluster.scalar(
        "SELECT l.name FROM runs r JOIN replicas l ON l.id = r.replica WHERE r.id = :run",
        run=run_id,
    )
    worker = next(w for w in cluster.workers if w.replica == owner)
    worker.kill()
    cluster.workers.remove(worker)
    cluster.add_worker(f"{owner}-restarted")
    record = api.wait_for_run(run_id, timeout=60)
    assert record["status"] == "failed"
    assert record["error"]["code"] == "not_retryable"
    assert record["error"]["node"] == "b"
    assert cluster.counts()[run_id, "b"] == 1
    assert cluster.counts()[run_id, "a"] == 1  # finished before the crash: reused


def test_a_cancel_through_either_server_reaches_the_worker(cluster: Cluster) -> None:
    first, second = cluster.api(0), cluster.api(1)
    key = first.published_app("cancelled", tally_flow(cluster.tally, seconds=60))
    run_id = queue_run(first, "cancelled", key, "x")
    first.wait_for_run(run_id, lambda run: run["status"] == "running", timeout=30)
    response = second.http.post(f"/api/v1/runs/{run_id}/cancel")
    assert response.status_code == 200, response.text
    record = first.wait_for_run(run_id, lambda run: run["status"] == "cancelled", timeout=10)
    assert record["cancel_requested_at"] is not None
    assert cluster.counts()[run_id, "b"] == 0


def echo_dataset(cluster: Cluster, api: Api, name: str, examples: int) -> None:
    """A generic dataset of `examples` examples e0, e1... whose answer is their question."""
    path = cluster.servers[0].data_dir / "sources" / f"{name}.jsonl"  # where sources may be read
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(
            json.dumps({"id": f"e{i}", "question": f"q{i}", "answer": f"q{i}"}) + "\n"
            for i in range(examples)
        )
    )
    created = api.http.post(
        "/api/v1/datasets", json={"name": name, "kind": "generic", "path": str(path)}
    )
    assert created.status_code == 201, created.text


def replica_names(cluster: Cluster, sql: str, **params: Any) -> Counter[str]:
    """How many of the runs that `sql` selects (ids) each live worker holds."""
    rows = cluster.rows(
        f"SELECT l.name FROM runs r JOIN replicas l ON l.id = r.replica WHERE r.id IN ({sql})",
        **params,
    )
    return Counter(row[0] for row in rows)


def test_an_evaluation_spreads_over_the_workers_and_survives_a_killed_one(
    cluster: Cluster,
) -> None:
    api = cluster.api(0)
    api.published_app("judged", tally_flow(cluster.tally, seconds=2.0))
    # One example per job (DAGWRIGHT_QUEUE_EVALUATION_CHUNK), in more lanes than one worker
    # takes jobs at once (DAGWRIGHT_WORKER_CONCURRENCY 25): both workers must run some.
    examples, lanes = 40, 30
    echo_dataset(cluster, api, "echo", examples)
    started = api.http.post(
        "/api/v1/evaluations",
        json={
            "app": "judged",
            "dataset": "echo",
            "inputs": {"value": "question"},
            "output": "value",
            "concurrency": lanes,
        },
    )
    assert started.status_code == 202, started.text
    evaluation_id = started.json()["id"]
    eval_runs = "SELECT id FROM runs WHERE mode = 'eval'"
    seen: list[int] = []  # the API's count of examples with a result, as they finish

    def spread_and_partly_done() -> bool:
        state = api.http.get(f"/api/v1/evaluations/{evaluation_id}").json()
        seen.append(state["done"])
        if state["status"] == "running":  # progress from the stored results, any worker's
            assert state["progress"]["total"] == examples
            # Read after `done` (GET reads one, then the other): results may land between.
            assert state["done"] <= state["progress"]["done"] <= examples
            assert state["progress"]["errors"] == 0
        on = replica_names(cluster, eval_runs)
        return len(on) == 2 and 0 < state["done"] < examples

    cluster.wait_for("examples on both workers, some done", spread_and_partly_done)
    assert state_is_running(api, evaluation_id)
    # Kill a worker that is running examples: the other runs what it left.
    owner = next(iter(replica_names(cluster, eval_runs + " AND status = 'running'")))
    worker = next(w for w in cluster.workers if w.replica == owner)
    worker.kill()
    cluster.workers.remove(worker)

    def finished() -> dict[str, Any] | None:
        state: dict[str, Any] = api.http.get(f"/api/v1/evaluations/{evaluation_id}").json()
        seen.append(state["done"])
        return state if state["status"] == "completed" else None

    state = cluster.wait_for("the evaluation completed", finished, timeout=120)
    cluster.add_worker(f"{owner}-again")  # back to two workers for the tests that follow
    assert state["done"] == examples
    assert seen == sorted(seen)  # results only come, and were visible as they came
    assert any(0 < done < examples for done in seen)
    results = api.http.get(f"/api/v1/evaluations/{evaluation_id}/results?limit=100").json()
    assert results["total"] == examples
    results = results["items"]
    assert sorted(r["id"] for r in results) == sorted(f"e{i}" for i in range(examples))
    assert all(r["correct"] for r in results)
    # One result per example, each from a run that succeeded; scored once, by one worker.
    rows = cluster.rows(
        "SELECT e.example_id, r.status FROM eval_results e JOIN runs r ON r.id = e.run_id "
        "WHERE e.evaluation_id = :e",
        e=evaluation_id,
    )
    assert len(rows) == examples
    assert {status for _, status in rows} == {"succeeded"}
    logs = "".join(w.output() for w in [*cluster.workers, worker])
    assert logs.count(f"evaluation {evaluation_id} scored") == 1


def test_an_evaluation_cancelled_through_either_server_stops_on_every_worker(
    cluster: Cluster,
) -> None:
    first, second = cluster.api(0), cluster.api(1)
    first.published_app("slow-judged", tally_flow(cluster.tally, seconds=1.0))
    examples = 30
    echo_dataset(cluster, first, "stopped", examples)
    body = {
        "app": "slow-judged",
        "dataset": "stopped",
        "inputs": {"value": "question"},
        "output": "value",
        "concurrency": 4,
    }
    started = first.http.post("/api/v1/evaluations", json=body)
    assert started.status_code == 202, started.text
    evaluation_id = started.json()["id"]

    def results() -> int:
        count: int = cluster.scalar(
            "SELECT count(*) FROM eval_results WHERE evaluation_id = :e", e=evaluation_id
        )
        return count

    cluster.wait_for("some examples done", lambda: results() >= 2)
    cancelled = second.http.post(f"/api/v1/evaluations/{evaluation_id}/cancel")
    assert cancelled.status_code == 202, cancelled.text
    assert first.http.get(f"/api/v1/evaluations/{evaluation_id}").json()["status"] == (
        "interrupted"
    )
    again = second.http.post(f"/api/v1/evaluations/{evaluation_id}/cancel")
    assert error_of(again, 409)["code"] == "evaluation_not_running"
    # Every chunk job of it is taken and ends (each finishes the example it was running).
    cluster.wait_for(
        "its chunk jobs gone",
        lambda: (
            cluster.scalar(
                "SELECT count(*) FROM procrastinate_jobs WHERE args->>'evaluation_id' = :e "
                "AND status IN ('todo', 'doing')",
                e=evaluation_id,
            )
            == 0
        ),
        timeout=60,
    )
    stopped_at = results()
    assert stopped_at < examples
    assert first.http.get(f"/api/v1/evaluations/{evaluation_id}").json()["done"] == stopped_at
    # Started again, it goes on with the examples left: one result each, scored.
    resumed = first.http.post("/api/v1/evaluations", json=body)
    assert resumed.status_code == 202, resumed.text
    assert resumed.json()["id"] == evaluation_id

    def completed() -> bool:
        state = first.http.get(f"/api/v1/evaluations/{evaluation_id}").json()
        return bool(state["status"] == "completed")

    cluster.wait_for("the resumed evaluation completed", completed, timeout=120)
    assert results() == examples


def test_waiting_for_an_evaluation_is_bounded_and_one_that_keeps_killing_workers_fails(
    cluster: Cluster,
) -> None:
    api = cluster.api(0)
    api.published_app("stuck", tally_flow(cluster.tally, seconds=60.0))
    echo_dataset(cluster, api, "stuck", 3)
    body = {
        "app": "stuck",
        "dataset": "stuck",
        "inputs": {"value": "question"},
        "output": "value",
        "concurrency": 1,
        "wait": True,
    }
    too_long = api.http.post("/api/v1/evaluations?timeout=3601", json=body)
    assert [p["field"] for p in error_of(too_long, 422)["problems"]] == ["query.timeout"]
    # wait=true answers when the timeout ends, with the evaluation as it stands (202).
    waited = api.http.post("/api/v1/evaluations?timeout=1", json=body)
    assert waited.status_code == 202, waited.text
    evaluation_id = waited.json()["id"]
    assert waited.json()["status"] == "running"
    assert waited.json()["error"] is None

    # Its chunk's job as if its workers had died MAX_ATTEMPTS - 1 times already; the worker
    # running it dies once more: the sweep gives the evaluation up instead of retrying it.
    # (Real deaths counted: test_hand_overs_do_not_count_as_deaths.)
    jobs = (
        "FROM procrastinate_jobs WHERE args->>'evaluation_id' = :e AND status = 'doing' "
        "AND task_name = 'dagwright.evaluate_examples'"
    )
    cluster.wait_for(
        "its chunk being run", lambda: cluster.scalar(f"SELECT count(*) {jobs}", e=evaluation_id)
    )
    died_before(cluster.db, jobs, MAX_ATTEMPTS - 1, e=evaluation_id)
    stuck_runs = (
        "SELECT r.id FROM runs r JOIN apps a ON a.id = r.app_id "
        "WHERE a.slug = 'stuck' AND r.status = 'running'"
    )
    owner = cluster.wait_for(
        "its example's run started", lambda: next(iter(replica_names(cluster, stuck_runs)), None)
    )
    worker = next(w for w in cluster.workers if w.replica == owner)
    worker.kill()
    cluster.workers.remove(worker)

    def failed() -> dict[str, Any] | None:
        state: dict[str, Any] = api.http.get(f"/api/v1/evaluations/{evaluation_id}").json()
        return state if state["status"] == "failed" else None

    state = cluster.wait_for("the evaluation given up", failed, timeout=60)
    cluster.add_worker(f"{owner}-again")
    assert state["error"]["code"] == "worker_lost"
    assert f"died {MAX_ATTEMPTS} times" in state["error"]["message"]
    # Failed, its given-up chunk not retried: its other chunks end with no example run.
    cluster.wait_for(
        "its other chunk jobs gone",
        lambda: (
            cluster.scalar(
                "SELECT count(*) FROM procrastinate_jobs WHERE args->>'evaluation_id' = :e "
                "AND status IN ('todo', 'doing')",
                e=evaluation_id,
            )
            == 0
        ),
        timeout=60,
    )
    assert cluster.scalar(f"SELECT count(*) {jobs.replace('doing', 'failed')}", e=evaluation_id)
    assert api.http.get(f"/api/v1/evaluations/{evaluation_id}").json()["done"] == 0


def died_before(db: Engine, jobs: str, deaths: int, **params: Any) -> None:
    """The jobs that `jobs` selects (FROM ... WHERE ...) as if their workers had died
    `deaths` times already (the sweep's count, services/queue/deaths.py)."""
    with db.begin() as conn:
        conn.execute(
            text(
                f"INSERT INTO dagwright_job_deaths (job_id, deaths) SELECT id, :deaths {jobs} "
                "ON CONFLICT (job_id) DO UPDATE SET deaths = excluded.deaths"
            ),
            {"deaths": deaths, **params},
        )


def state_is_running(api: Api, evaluation_id: str) -> bool:
    return bool(api.http.get(f"/api/v1/evaluations/{evaluation_id}").json()["status"] == "running")


def test_a_stopping_worker_hands_its_runs_over(cluster: Cluster) -> None:
    """SIGTERM: the runs that finish within the grace period finish on the stopping worker;
    the others go back to the queue at once (not left to the stale-job sweep) and another
    worker resumes them from their recorded node results."""
    api = cluster.api(0)
    hold = cluster.folder / "hold"  # while it exists, the held nodes wait
    hold.touch()
    held = tally_flow(cluster.tally, seconds=0)
    held["nodes"][2]["config"]["hold"] = str(hold)  # s: waits for the hold
    once = tally_flow(cluster.tally, seconds=0)
    once["nodes"][3]["config"]["hold"] = str(hold)  # b, the not-retryable one, waits
    key_held = api.published_app("held", held)
    key_short = api.published_app("short", tally_flow(cluster.tally, seconds=1.0))
    key_once = api.published_app("held-once", once)
    # One worker, so that it holds every run when it is told to stop.
    for worker in cluster.workers:
        worker.stop()
    cluster.workers.clear()
    leaver = cluster.add_worker("leaver")
    long_runs = [queue_run(api, "held", key_held, f"h{i}") for i in range(3)]
    once_run = queue_run(api, "held-once", key_once, "o")
    # And an evaluation whose examples (a chunk job each, two lanes) wait for the hold.
    examples = 4
    echo_dataset(cluster, api, "handed", examples)
    body = {"app": "held", "dataset": "handed", "inputs": {"value": "question"}}
    started = api.http.post("/api/v1/evaluations", json={**body, "concurrency": 2})
    assert started.status_code == 202, started.text
    evaluation_id = started.json()["id"]

    def began(run_id: str, node_id: str) -> bool:
        return cluster.counts()[run_id, node_id] >= 1

    cluster.wait_for(
        "the held runs and two examples inside their held node",
        lambda: (
            all(began(run, "s") for run in long_runs)
            and began(once_run, "b")
            and cluster.scalar(
                "SELECT count(*) FROM runs r JOIN apps a ON a.id = r.app_id "
                "WHERE a.slug = 'held' AND r.mode = 'eval'"
            )
            == 2
        ),
    )
    short_runs = [queue_run(api, "short", key_short, f"s{i}") for i in range(3)]
    cluster.wait_for("the short runs inside s", lambda: all(began(r, "s") for r in short_runs))
    assert leaver.process is not None
    leaver.process.terminate()  # SIGTERM, as `docker stop` sends
    assert leaver.process.wait(SHUTDOWN_GRACE + 30) == 0
    cluster.workers.remove(leaver)

    # No worker is left: what the leaver handed over waits in the queue, its job ready.
    statuses = dict(
        cluster.rows(
            "SELECT id, status FROM runs WHERE id = ANY(:ids)",
            ids=[*long_runs, once_run, *short_runs],
        )
    )
    assert {statuses[run] for run in short_runs} == {"succeeded"}  # within the grace
    assert {statuses[run] for run in [*long_runs, once_run]} == {"queued"}
    assert "handed back to the queue" in leaver.output()
    assert_waiting_in_the_queue(cluster, [*long_runs, once_run], evaluation_id, examples)

    hold.unlink()
    cluster.add_worker("taker")
    for run in long_runs:
        record = api.wait_for_run(run, ended, timeout=60)
        assert record["status"] == "succeeded", record
        assert record["outputs"] == {"value": record["inputs"]["value"]}
    record = api.wait_for_run(once_run, ended, timeout=60)
    assert record["status"] == "failed"
    assert record["error"]["code"] == "not_retryable"  # cut short inside it: not called again
    counts = cluster.counts()
    for run in [*long_runs, once_run, *short_runs]:
        assert counts[run, "a"] == 1, f"{run}/a finished, then ran again"
        assert counts[run, "b"] == 1
    for run in long_runs:
        assert counts[run, "s"] == 2  # cut short by the hand-over, then run again
    for run in short_runs:
        assert counts[run, "s"] == 1
    # The handed-over examples ran on the taker: one result each, from a run that succeeded.
    assert_completed_once_each(cluster, api, evaluation_id, examples)


def assert_waiting_in_the_queue(
    cluster: Cluster, runs: list[str], evaluation_id: str, examples: int
) -> None:
    """The runs and the evaluation's chunks handed over by a stopped worker: their jobs ready
    for any worker (none holds them), the runs' finished nodes recorded, no example done."""
    jobs = cluster.rows(
        "SELECT j.status, j.worker_id FROM procrastinate_jobs j JOIN runs r ON r.job_id = j.id "
        "WHERE r.id = ANY(:ids)",
        ids=runs,
    )
    assert [tuple(job) for job in jobs] == [("todo", None)] * len(runs)
    chunk_jobs = cluster.rows(
        "SELECT status, worker_id FROM procrastinate_jobs WHERE args->>'evaluation_id' = :e",
        e=evaluation_id,
    )
    assert [tuple(job) for job in chunk_jobs] == [("todo", None)] * examples
    results = "SELECT count(*) FROM eval_results WHERE evaluation_id = :e"
    assert cluster.scalar(results, e=evaluation_id) == 0
    recorded = cluster.rows(
        "SELECT run_id FROM run_nodes WHERE run_id = ANY(:ids) AND node = 'a' "
        "AND status = 'succeeded'",
        ids=runs,
    )
    assert {row[0] for row in recorded} == set(runs)


def assert_completed_once_each(
    cluster: Cluster, api: Api, evaluation_id: str, examples: int
) -> None:
    cluster.wait_for(
        "the evaluation completed",
        lambda: (
            api.http.get(f"/api/v1/evaluations/{evaluation_id}").json()["status"] == "completed"
        ),
    )
    rows = cluster.rows(
        "SELECT r.status FROM eval_results e JOIN runs r ON r.id = e.run_id "
        "WHERE e.evaluation_id = :e",
        e=evaluation_id,
    )
    assert [row[0] for row in rows] == ["succeeded"] * examples


def ended(run: dict[str, Any]) -> bool:
    return run["status"] not in ("queued", "running")


def test_hand_overs_do_not_count_as_deaths(cluster: Cluster) -> None:
    """A run handed over by stopping workers (SIGTERM, a deploy) MAX_ATTEMPTS times, then
    caught by MAX_ATTEMPTS - 1 worker deaths (SIGKILL), still finishes: only deaths count. A
    run whose workers die MAX_ATTEMPTS times is given up with `worker_lost`."""
    api = cluster.api(0)
    holds = {name: cluster.folder / f"hold-{name}" for name in ("lasting", "doomed")}
    keys = {}
    for name, hold in holds.items():
        hold.touch()
        held = tally_flow(cluster.tally, seconds=0)
        held["nodes"][2]["config"]["hold"] = str(hold)  # s: waits for the hold
        keys[name] = api.published_app(name, held)
    # One worker at a time, so that it holds the runs when it is stopped or killed; no grace:
    # a stopping worker hands its runs over at once.
    for worker in cluster.workers:
        worker.stop()
    cluster.workers.clear()
    lasting = queue_run(api, "lasting", keys["lasting"], "l")

    def inside_s(runs: dict[str, int]) -> bool:
        """Each run began its held node this many times, with its node a's result recorded
        (results are written in group commits: a worker killed a moment after a ended may
        take it unrecorded, and a runs again), or ended."""
        counts = cluster.counts()
        return all(
            (counts[run, "s"] >= times and recorded(run, "a")) or ended(api.get_run(run))
            for run, times in runs.items()
        )

    def recorded(run: str, node: str) -> bool:
        return bool(
            cluster.scalar(
                "SELECT count(*) FROM run_nodes "
                "WHERE run_id = :run AND node = :node AND status = 'succeeded'",
                run=run,
                node=node,
            )
        )

    def still_running(run: str) -> None:
        record = api.get_run(run)
        assert record["status"] == "running", record

    for hand_over in range(1, MAX_ATTEMPTS + 1):
        leaver = cluster.add_worker(f"leaver-{hand_over}", DAGWRIGHT_WORKER_SHUTDOWN_GRACE="0")
        cluster.wait_for(
            f"hand-over {hand_over}: inside s", partial(inside_s, {lasting: hand_over})
        )
        still_running(lasting)
        assert leaver.process is not None
        leaver.process.terminate()
        assert leaver.process.wait(30) == 0
        cluster.workers.remove(leaver)
        assert api.get_run(lasting)["status"] == "queued"

    doomed = queue_run(api, "doomed", keys["doomed"], "d")
    for death in range(1, MAX_ATTEMPTS + 1):
        # The first takes the queued runs; the others, once their sweep resumes the runs of
        # the one killed before (STALLED_AFTER).
        mortal = cluster.add_worker(f"mortal-{death}")
        cluster.wait_for(
            f"death {death}: both inside s",
            partial(inside_s, {lasting: MAX_ATTEMPTS + death, doomed: death}),
        )
        still_running(lasting)  # before the fix: given up at the first death
        still_running(doomed)
        if death == MAX_ATTEMPTS:  # the lasting run's workers died MAX_ATTEMPTS - 1 times
            holds["lasting"].unlink()
            record = api.wait_for_run(lasting, ended, timeout=30)
            assert record["status"] == "succeeded", record
            assert record["outputs"] == {"value": "l"}
        mortal.kill()
        cluster.workers.remove(mortal)

    cluster.add_worker("sweeper")  # finds the doomed run's job stalled a fifth time
    record = api.wait_for_run(doomed, ended, timeout=30)
    assert record["status"] == "failed", record
    assert record["error"]["code"] == "worker_lost"
    assert f"died {MAX_ATTEMPTS} times" in record["error"]["message"]
    counts = cluster.counts()
    assert counts[lasting, "a"] == counts[doomed, "a"] == 1  # recorded once, then reused
    assert counts[lasting, "s"] == 2 * MAX_ATTEMPTS
    assert counts[lasting, "b"] == 1
    assert counts[doomed, "s"] == MAX_ATTEMPTS
    assert counts[doomed, "b"] == 0
    holds["doomed"].unlink()
