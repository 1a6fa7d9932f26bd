"""Queue mode's API side, on an in-process server with no worker (queued runs stay queued):
the per-app and queue-depth limits answered with 429 and Retry-After, a queued run
cancelled before any worker takes it, sync calls still answered in the API process, and the
order in which workers take jobs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

from dagwright.composition import Composition
from dagwright.services.queue.jobs import Priority, conninfo, defer_run, deferring_app
from dagwright.services.queue.settings import QueueConfigError, QueueSettings
from dagwright.services.webhook_signing import signed_headers
from dagwright.settings import Settings
from support.server import LiveServer, echo_flow, error_of, live_server


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveServer]:
    monkeypatch.setenv("DAGWRIGHT_QUEUE", "procrastinate")
    monkeypatch.setenv("DAGWRIGHT_QUEUE_APP_LIMIT", "2")
    monkeypatch.setenv("DAGWRIGHT_QUEUE_MAX_DEPTH", "3")
    with live_server("postgresql", tmp_path) as running:
        # The health check answers before start-up is done; any other route waits for it,
        # and with it for the queue's tables (the priority test defers without the API).
        assert running.api.http.get("/api/v1/apps").status_code == 200
        yield running


def queue(server: LiveServer, slug: str, key: str) -> tuple[int, dict[str, object], str | None]:
    response = server.api.run(slug, key, {"question": "q"}, **{"async": True})
    return response.status_code, response.json(), response.headers.get("Retry-After")


def test_limits_answer_429_with_retry_after(server: LiveServer) -> None:
    busy = server.api.published_app("busy", echo_flow())
    other = server.api.published_app("other", echo_flow())
    for _ in range(2):
        status, body, _ = queue(server, "busy", busy)
        assert status == 202
        assert body["status"] == "queued"
    # The app's own limit (2 queued or running)...
    response = server.api.run("busy", busy, {"question": "q"}, **{"async": True})
    assert error_of(response, 429)["code"] == "queue_full"
    assert response.headers["Retry-After"] == "2"
    assert "this app" in response.json()["error"]["message"]
    # ...then the queue's depth (3 waiting), whichever app asks.
    assert queue(server, "other", other)[0] == 202
    response = server.api.run("other", other, {"question": "q"}, **{"async": True})
    assert error_of(response, 429)["code"] == "queue_full"
    assert "queue is full" in response.json()["error"]["message"]
    # A sync call is no job: it is answered by the API process at once.
    answered = server.api.run("busy", busy, {"question": "sync"})
    assert answered.status_code == 200, answered.text
    assert answered.json()["outputs"] == {"answer": "Echo: sync"}


def test_a_queued_run_cancelled_before_a_worker_takes_it(server: LiveServer) -> None:
    key = server.api.published_app("patient", echo_flow())
    statuses = [queue(server, "patient", key) for _ in range(2)]
    run_id = str(statuses[0][1]["run_id"])
    assert server.api.get_run(run_id)["status"] == "queued"
    response = server.api.http.post(f"/api/v1/runs/{run_id}/cancel")
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "cancelled"
    record = server.api.get_run(run_id)
    assert record["status"] == "cancelled"
    assert record["error"]["code"] == "cancelled"
    assert record["nodes"] == []  # no node ever ran
    # A cancelled run no longer counts against the app's limit.
    assert queue(server, "patient", key)[0] == 202
    again = server.api.http.post(f"/api/v1/runs/{run_id}/cancel")
    assert error_of(again, 409)["code"] == "run_finished"


def test_a_webhook_queues_its_run_behind_interactive_work(server: LiveServer) -> None:
    server.api.published_app("hooked", echo_flow())
    assert server.api.http.put("/api/v1/secrets/in_key", json={"value": "k3y"}).status_code == 204
    created = server.api.http.post(
        "/api/v1/apps/hooked/triggers",
        json={"kind": "webhook", "name": "in", "secret_name": "in_key"},
    ).json()
    body = json.dumps({"question": "from a hook"}).encode()
    answer = httpx.post(
        server.base_url + created["url"], content=body, headers=signed_headers("k3y", body)
    )
    assert answer.status_code == 202, answer.text
    run = server.api.get_run(answer.json()["run_id"])
    assert run["status"] == "queued"
    assert run["mode"] == "webhook"
    assert run["inputs"] == {"question": "from a hook"}
    url = server.settings.database_url
    assert url is not None
    engine = create_engine(url, poolclass=NullPool)
    try:
        with engine.connect() as conn:
            job = conn.execute(
                text(
                    "SELECT j.priority, j.args->>'run_id' FROM procrastinate_jobs j "
                    "JOIN runs r ON r.job_id = j.id WHERE r.id = :run"
                ),
                {"run": run["id"]},
            ).one()
    finally:
        engine.dispose()
    assert tuple(job) == (int(Priority.SCHEDULED), run["id"])


def jobs_in_order(engine: Engine) -> list[str]:
    """The run ids of queued jobs, in the order a worker takes them."""
    taken = []
    with engine.begin() as conn:
        while True:
            row = conn.execute(
                text("SELECT args->>'run_id' FROM procrastinate_fetch_job_v2(NULL, NULL)")
            ).first()
            if row is None or row[0] is None:
                return taken
            taken.append(row[0])


def test_workers_take_interactive_work_before_batch_work(server: LiveServer) -> None:
    url = server.settings.database_url
    assert url is not None
    engine = create_engine(url, poolclass=NullPool)
    app = deferring_app(url)
    try:
        with engine.begin() as conn:
            for run_id, priority in [
                ("batch-1", Priority.BATCH),
                ("published-1", Priority.PUBLISHED),
                ("batch-2", Priority.BATCH),
                ("scheduled-1", Priority.SCHEDULED),
                ("debug-1", Priority.INTERACTIVE),
                ("published-2", Priority.PUBLISHED),
            ]:
                defer_run(app, conn, run_id, {}, priority=priority, deadline=None)
        order = jobs_in_order(engine)
    finally:
        engine.dispose()
    assert order == ["debug-1", "published-1", "published-2", "scheduled-1", "batch-1", "batch-2"]


def test_queue_mode_needs_postgresql() -> None:
    with pytest.raises(QueueConfigError, match="PostgreSQL"):
        conninfo(None)  # the embedded SQLite
    with pytest.raises(QueueConfigError, match="PostgreSQL"):
        conninfo("mysql+pymysql://root@127.0.0.1/test")
    assert conninfo("postgresql+psycopg://u:p@db:5432/d?options=-csearch_path%3Ds") == (
        "postgresql://u:p@db:5432/d?options=-csearch_path%3Ds"
    )
    assert not Composition(Settings()).queue_settings().enabled  # the embedded default
    assert Composition(Settings(queue="procrastinate")).queue_settings().enabled
    with pytest.raises(ValidationError, match="procrastinate"):
        Settings(queue="celery")
    with pytest.raises(QueueConfigError, match="STALLED_AFTER"):
        QueueSettings(enabled=True, heartbeat=2.0, stalled_after=1.0)
