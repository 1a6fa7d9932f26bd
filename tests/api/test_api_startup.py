"""Start-up in steps (api/startup.py): the health check answers as soon as the server
listens; the core's routes (apps, runs, keys, published calls) once the database and the
services are ready; every other request waits until the data layer is ready too; a
start-up that fails answers 503 to every request, and `dagwright serve` stops. A published
call of a flow with a table block, answered while the data layer is still being imported,
has it imported in a thread (runtime/executor.py), not on the event loop."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from support.probe import health_probe
from support.server import (
    Api,
    ServerProcess,
    edge,
    flow,
    key_headers,
    live_settings,
    node,
    serve_in_thread,
    server_environment,
    subprocess_environment,
)


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_every_route_answers_once_the_health_check_has(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "two-step").start(started=False)  # health only
    try:
        with httpx.Client(base_url=server.base_url, timeout=30.0) as client:
            # Asked at once: each waits for the rest of start-up, none fails for it.
            ready = client.get("/api/v1/ready")
            assert ready.status_code == 200, ready.text
            assert ready.json()["status"] == "ready"
            for path in ("/api/v1/sources", "/api/v1/apps", "/openapi.json"):
                assert client.get(path).status_code == 200, path
    finally:
        server.stop()


def test_the_core_routes_answer_before_the_data_layer_is_ready(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "staged").start(started=False)  # health only
    answered: list[str] = []
    statuses: dict[str, int] = {}
    lock = threading.Lock()

    def ask(path: str) -> None:
        with httpx.Client(base_url=server.base_url, timeout=60.0) as client:
            status = client.get(path).status_code
        with lock:
            answered.append(path)
            statuses[path] = status

    # Asked at once while start-up's thread works, the health check answering throughout
    # (nothing is imported on the event loop).
    paths = ("/api/v1/ready", "/docs", "/api/v1/sources", "/api/v1/tables", "/api/v1/apps", "/")
    try:
        with health_probe(server.base_url):
            askers = [threading.Thread(target=ask, args=(path,)) for path in paths]
            for asker in askers:
                asker.start()
            for asker in askers:
                asker.join()
    finally:
        server.stop()
    assert statuses.pop("/") in (200, 307)  # the editor, or (unbuilt) a redirect to /docs
    assert statuses == dict.fromkeys(paths[:-1], 200)
    # The editor's files (or, unbuilt, its redirect to /docs) answered at once, its app list
    # once the core stage was done; the data routes, the API's documentation and /ready
    # waited for the data layer and every route (the second stage).
    assert answered[:2] == ["/", "/api/v1/apps"], answered


def test_a_table_flow_called_during_start_up_imports_the_data_layer_off_the_loop(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    first = ServerProcess(data, "publisher").start()
    api = Api(first.base_url)
    try:
        table_flow = flow(
            [
                node("sql", "text_input", name="sql"),
                node("run", "sql_query"),
                node("out", "output", name="rows"),
            ],
            [edge("sql", "run.sql"), edge("run.rows", "out")],
            name="tables",
        )
        key = api.published_app("tables", table_flow)
    finally:
        api.close()
        first.stop()
    # A restart, called at once: the call passes the gate once the core stage is done, while
    # start-up's thread imports the data layer (the second stage).
    server = ServerProcess(data, "restarted").start(started=False)  # health only
    try:
        with (
            health_probe(server.base_url),
            httpx.Client(base_url=server.base_url, timeout=60.0) as client,
        ):
            answer = client.post(
                "/api/v1/apps/tables/run",
                json={"inputs": {"sql": "SELECT 41 + 1 AS answer"}},
                headers=key_headers(key),
            )
    finally:
        server.stop()
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"] == {"rows": [{"answer": 42}]}


def test_a_failed_start_up_answers_503_naming_the_reason(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://dagwright@127.0.0.1:{closed_port()}/none"
    settings = live_settings(tmp_path, database_url=url, replica="doomed")
    with server_environment(), serve_in_thread(settings, ready=False) as base_url:
        for path in ("/api/v1/apps", "/api/v1/ready", "/api/v1/health"):
            response = httpx.get(f"{base_url}{path}", timeout=30.0)
            assert response.status_code == 503, (path, response.text)
            error = response.json()["error"]
            assert error["code"] == "server_unavailable"
            assert "the server failed to start" in error["message"]


def test_serve_stops_when_its_start_up_fails(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://dagwright@127.0.0.1:{closed_port()}/none"
    env = subprocess_environment(DAGWRIGHT_DATA_DIR=str(tmp_path), DAGWRIGHT_DATABASE_URL=url)
    port = closed_port()
    done = subprocess.run(
        [sys.executable, "-m", "dagwright", "serve", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "dagwright failed to start" in done.stderr


def test_serve_options_reach_the_server_processes(tmp_path: Path) -> None:
    """`--host` and `--port` go over the environment's in the processes uvicorn starts too:
    with DAGWRIGHT_HOST=0.0.0.0 and no admin token, `--host 127.0.0.1` is a loopback server
    that starts (the processes used to read 0.0.0.0 again and refuse to start)."""
    port = closed_port()
    env = subprocess_environment(
        DAGWRIGHT_DATA_DIR=str(tmp_path), DAGWRIGHT_HOST="0.0.0.0", DAGWRIGHT_PORT="9"
    )
    env.pop("DAGWRIGHT_ADMIN_TOKEN", None)
    server = subprocess.Popen(
        [sys.executable, "-m", "dagwright", "serve", "--host", "127.0.0.1", "--port", str(port)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()[1]
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/ready", timeout=5)
                if answer.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the server did not get ready"
            time.sleep(0.2)
        # The editor API is open on loopback without a token: the server read 127.0.0.1.
        assert httpx.get(f"http://127.0.0.1:{port}/api/v1/apps", timeout=10).status_code == 200
    finally:
        server.terminate()
        server.wait(timeout=30)
