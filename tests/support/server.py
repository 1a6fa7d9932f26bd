"""Real dagwright servers for the API tests: in-process (uvicorn in a thread, on a loopback
port) or as a `dagwright serve` process, on SQLite or on a PostgreSQL schema of its own; and
helpers to talk to them over HTTP (apps, keys, server-sent events, polling).

A test module declares its server fixture with these helpers, e.g.

    @pytest.fixture(scope="module", params=DATABASES)
    def server(request, tmp_path_factory):
        with live_server(request.param, tmp_path_factory.mktemp("server")) as running:
            yield running

The environment a server's settings are read from (`live_settings`) and it runs in is made
neutral: no OPENAI_API_KEY or DAGWRIGHT_SETTINGS (so models are answered by dagwright's
scripted model), no ./dagwright.toml but its data directory's, and the test blocks of
`server_blocks/` on DAGWRIGHT_BLOCKS_PATH.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import uvicorn
from sqlalchemy import create_engine, text
from sqlalchemy.pool import NullPool

from dagwright.api.app import create_app
from dagwright.settings import Settings, load_settings
from support.database import POSTGRES_URL, postgres_problem

BLOCKS_DIR = Path(__file__).resolve().parent / "server_blocks"
EXAMPLES = Path(__file__).resolve().parents[2] / "flows" / "examples"
# Variables that would point a server at a real model or another configuration.
NEUTRALISED = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "DAGWRIGHT_SETTINGS",
    "DAGWRIGHT_SECRET_KEY",
    "DAGWRIGHT_EGRESS_ALLOW",  # a test allows what it needs; a developer's list must not leak in
)
SERVER_ENV = ("DAGWRIGHT_DATA_DIR", "DAGWRIGHT_DATABASE_URL", "DAGWRIGHT_REPLICA")


# -- databases ------------------------------------------------------------------------------


def with_search_path(url: str, schema: str) -> str:
    """The URL with libpq's `options` set so that every connection uses `schema`."""
    separator = "&" if "?" in url else "?"
    return f"{url}{separator}options={quote(f'-csearch_path={schema}', safe='')}"


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A database URL on a new, empty PostgreSQL schema, dropped afterwards; skips the test
    when the PostgreSQL test server does not answer."""
    problem = postgres_problem()
    if problem is not None:
        pytest.skip(problem)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(POSTGRES_URL, poolclass=NullPool)
    with admin.begin() as connection:
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield with_search_path(POSTGRES_URL, schema)
    finally:
        with admin.begin() as connection:
            connection.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


@contextmanager
def database_url_for(kind: str) -> Iterator[str | None]:
    """None for SQLite (the server's file in its data directory), else a PostgreSQL URL."""
    if kind == "sqlite":
        yield None
        return
    with postgres_schema() as url:
        yield url


# -- the environment ------------------------------------------------------------------------


@contextmanager
def server_environment(**values: str | None) -> Iterator[None]:
    """os.environ without model settings and with the test blocks path (and `values`: None
    removes a variable), restored afterwards."""
    changes: dict[str, str | None] = dict.fromkeys(NEUTRALISED)
    changes["DAGWRIGHT_BLOCKS_PATH"] = str(BLOCKS_DIR)
    changes.update(values)
    saved = {name: os.environ.get(name) for name in changes}
    try:
        for name, value in changes.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def subprocess_environment(**values: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in NEUTRALISED and k not in SERVER_ENV}
    env["DAGWRIGHT_BLOCKS_PATH"] = str(BLOCKS_DIR)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(values)
    return env


# -- clients ----------------------------------------------------------------------------------


def bearer(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


@dataclass
class Api:
    """An HTTP client of one server, with the editor API's common steps."""

    base_url: str
    admin_token: str | None = None
    http: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.http = httpx.Client(
            base_url=self.base_url, headers=bearer(self.admin_token), timeout=30.0
        )

    def close(self) -> None:
        self.http.close()

    def create_app(self, slug: str, name: str | None = None) -> dict[str, Any]:
        response = self.http.post("/api/v1/apps", json={"slug": slug, "name": name or slug})
        assert response.status_code == 201, response.text
        app: dict[str, Any] = response.json()
        return app

    def save(self, slug: str, flow: Mapping[str, Any], note: str = "") -> dict[str, Any]:
        response = self.http.post(
            f"/api/v1/apps/{slug}/versions", json={"flow": dict(flow), "note": note}
        )
        assert response.status_code == 201, response.text
        version: dict[str, Any] = response.json()
        return version

    def publish(self, slug: str, version_id: str) -> dict[str, Any]:
        response = self.http.post(f"/api/v1/apps/{slug}/publish", json={"version_id": version_id})
        assert response.status_code == 200, response.text
        app: dict[str, Any] = response.json()
        return app

    def new_key(self, slug: str, name: str = "test") -> str:
        response = self.http.post(f"/api/v1/apps/{slug}/keys", json={"name": name})
        assert response.status_code == 201, response.text
        key: str = response.json()["key"]
        return key

    def published_app(self, slug: str, flow: Mapping[str, Any]) -> str:
        """Create the app, save and publish the flow, and return a new API key of the app."""
        self.create_app(slug)
        version = self.save(slug, flow)
        self.publish(slug, version["id"])
        return self.new_key(slug)

    def run(
        self, slug: str, key: str | None, inputs: Mapping[str, Any] | None = None, **extra: Any
    ) -> httpx.Response:
        """POST /api/v1/apps/{slug}/run with the app's key (not the admin token)."""
        body = {"inputs": dict(inputs or {}), **extra}
        return self.http.post(f"/api/v1/apps/{slug}/run", json=body, headers=key_headers(key))

    def get_run(self, run_id: str, key: str | None = None) -> dict[str, Any]:
        headers = key_headers(key) if key is not None else None
        response = self.http.get(f"/api/v1/runs/{run_id}", headers=headers)
        assert response.status_code == 200, response.text
        record: dict[str, Any] = response.json()
        return record

    def wait_for_run(
        self,
        run_id: str,
        until: Callable[[dict[str, Any]], bool] = lambda run: run["status"] != "running",
        key: str | None = None,
        timeout: float = 10.0,
    ) -> dict[str, Any]:
        """Poll GET /api/v1/runs/{id} until `until(record)` holds (by default: finished)."""
        deadline = time.monotonic() + timeout
        while True:
            record = self.get_run(run_id, key)
            if until(record):
                return record
            if time.monotonic() > deadline:
                raise AssertionError(f"run {run_id} not as expected after {timeout}s: {record}")
            time.sleep(0.05)


def key_headers(key: str | None) -> dict[str, str]:
    """Headers that send the app key, and no admin token (even when the client has one)."""
    return {"Authorization": f"Bearer {key}"} if key is not None else {"Authorization": ""}


# -- server-sent events ---------------------------------------------------------------------


@dataclass(slots=True)
class Event:
    event: str
    data: Any
    id: str | None


def parse_sse(lines: Iterator[str]) -> Iterator[Event]:
    """Events from the lines of a text/event-stream body: `event:`, `data:` (JSON) and `id:`
    fields, a blank line ending each event; comments (`:`) ignored."""
    kind = "message"
    data: list[str] = []
    event_id: str | None = None
    for line in lines:
        if line == "":
            if data:
                yield Event(kind, json.loads("\n".join(data)), event_id)
            kind, data, event_id = "message", [], None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            kind = value
        elif name == "data":
            data.append(value)
        elif name == "id":
            event_id = value
    if data:
        yield Event(kind, json.loads("\n".join(data)), event_id)


def sse_events(response: httpx.Response) -> list[Event]:
    """Every event of a streamed response (read to its end)."""
    assert response.status_code == 200, response.read().decode()
    assert response.headers["content-type"].startswith("text/event-stream")
    return list(parse_sse(response.iter_lines()))


# -- flows ------------------------------------------------------------------------------------


def example(name: str) -> dict[str, Any]:
    flow: dict[str, Any] = json.loads((EXAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    return flow


def node(node_id: str, block: str, **config: Any) -> dict[str, Any]:
    return {"id": node_id, "block": block, "config": config}


def edge(source: str, target: str) -> dict[str, Any]:
    """'a' or 'a.port' -> 'b.port' (a source's port defaults to output)."""
    s_node, _, s_port = source.partition(".")
    t_node, _, t_port = target.partition(".")
    return {
        "source": {"node": s_node, "port": s_port or "output"},
        "target": {"node": t_node, "port": t_port or "value"},
    }


def flow(
    nodes: list[dict[str, Any]], edges: list[dict[str, Any]], name: str = "test"
) -> dict[str, Any]:
    return {"format": "dagwright.flow", "version": 1, "name": name, "nodes": nodes, "edges": edges}


def echo_flow(
    template: str = "Echo: {{ question }}", input_name: str = "question"
) -> dict[str, Any]:
    """One text input -> template -> output `answer`."""
    return flow(
        [
            node("q", "text_input", name=input_name),
            node("t", "template", template=template),
            node("out", "output", name="answer"),
        ],
        [edge("q", f"t.{input_name}"), edge("t", "out")],
        name="echo",
    )


def slow_flow(seconds: float, input_name: str = "value") -> dict[str, Any]:
    """input -> quick template -> slow_echo(seconds) -> output `value`."""
    return flow(
        [
            node("inp", "text_input", name=input_name),
            node("quick", "template", template="quick:{{ v }}"),
            node("slow", "slow_echo", seconds=seconds),
            node("out", "output", name="value"),
        ],
        [edge("inp", "quick.v"), edge("quick", "slow"), edge("slow", "out")],
        name="slow",
    )


# -- an in-process server ---------------------------------------------------------------------


@dataclass
class LiveServer:
    """A server running in a thread of this process, and an admin client of it."""

    settings: Settings
    base_url: str
    api: Api

    def client(self, token: str | None = None) -> Api:
        """Another client (close it), with another token (or none)."""
        return Api(self.base_url, token)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def live_settings(data_dir: Path, **values: Any) -> Settings:
    """The settings of a test server: `values` over those of the test's environment, made
    neutral (`server_environment`), and of `data_dir`'s dagwright.toml (a test that wants a
    settings file writes it there; the checkout's is not read)."""
    cwd = os.getcwd()
    os.chdir(data_dir)
    try:
        with server_environment():
            return load_settings(data_dir=data_dir, **values)
    finally:
        os.chdir(cwd)


@contextmanager
def serve_in_thread(settings: Settings, *, ready: bool = True) -> Iterator[str]:
    """uvicorn running `create_app(settings)` in a thread; yields its base URL once it
    listens and (`ready`) its start-up is done (GET /api/v1/ready, api/startup.py)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        create_app(settings), log_level="warning", timeout_graceful_shutdown=2, lifespan="on"
    )
    server = uvicorn.Server(config)
    failure: list[BaseException] = []

    def main() -> None:
        try:
            server.run(sockets=[sock])
        except BaseException as exc:  # reported by the waiting test, not lost in the thread
            failure.append(exc)

    thread = threading.Thread(target=main, name="dagwright-test-server", daemon=True)
    # Start-up in the data directory, as a `dagwright serve` child process starts
    # (ChildProcess): what it may resolve against the working directory is the test's.
    cwd = os.getcwd()
    os.chdir(settings.data_dir)
    try:
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if failure or not thread.is_alive():
                raise RuntimeError(f"the test server did not start: {failure}")
            if time.monotonic() > deadline:
                raise RuntimeError("the test server did not start within 20 s")
            time.sleep(0.01)
        if ready:  # still in the data directory: start-up's thread is not done
            answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/ready", timeout=60.0)
            if answer.status_code != 200:
                server.should_exit = True
                thread.join(15)
                raise RuntimeError(f"the test server's start-up failed: {answer.text}")
    finally:
        os.chdir(cwd)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
        assert not thread.is_alive(), "the test server did not stop"


@contextmanager
def live_server(
    database: str,
    data_dir: Path,
    *,
    replica: str | None = None,
    admin_token: str | None = None,
    rate_limit: float = 1000.0,
    **settings: Any,
) -> Iterator[LiveServer]:
    """An in-process server on SQLite ("sqlite") or a fresh PostgreSQL schema ("postgresql")."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with database_url_for(database) as url, server_environment():
        config = live_settings(
            data_dir,
            replica=replica or f"test-{uuid.uuid4().hex[:6]}",
            database_url=url,
            admin_token=admin_token,
            rate_limit=rate_limit,
            **settings,
        )
        with serve_in_thread(config) as base_url:
            api = Api(base_url, admin_token)
            try:
                yield LiveServer(config, base_url, api)
            finally:
                api.close()


# -- a server process -------------------------------------------------------------------------


@dataclass
class ChildProcess:
    """A `python -m dagwright ...` child process with its output in a log file."""

    data_dir: Path
    replica: str
    database_url: str | None = None
    env: dict[str, str] = field(default_factory=dict)  # more environment variables
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None

    def launch(self, *args: str) -> subprocess.Popen[bytes]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = subprocess_environment(
            DAGWRIGHT_DATA_DIR=str(self.data_dir), DAGWRIGHT_REPLICA=self.replica, **self.env
        )
        if self.database_url is not None:
            env["DAGWRIGHT_DATABASE_URL"] = self.database_url
        self.log = self.data_dir / f"{args[0]}-{self.replica}-{uuid.uuid4().hex[:4]}.log"
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "dagwright", *args],
                env=env,
                cwd=self.data_dir,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self.process

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log and self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shut-down code runs, as in a crash."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.kill()


@dataclass
class WorkerProcess(ChildProcess):
    """`python -m dagwright worker` (queue mode: set DAGWRIGHT_QUEUE in `env`)."""

    def start(self) -> WorkerProcess:
        self.launch("worker")
        return self


@dataclass
class ServerProcess(ChildProcess):
    """`python -m dagwright serve` as a child process (SIGKILL it to simulate a crash)."""

    port: int = field(default_factory=free_port)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0, *, started: bool = True) -> ServerProcess:
        """Until the health check answers and (`started`) start-up is done."""
        self.launch("serve", "--port", str(self.port))
        assert self.process is not None
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited at start-up: {self.output()}")
            try:
                response = httpx.get(f"{self.base_url}/api/v1/health", timeout=1.0)
                if response.status_code == 200:
                    assert response.json()["replica"] == self.replica
                    if started:
                        self._until_started(deadline)
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the server did not answer in {timeout}s: {self.output()}")
            time.sleep(0.05)

    def _until_started(self, deadline: float) -> None:
        """The health check answers as soon as the server listens; every other route waits
        for start-up (migrations, the queue's tables, the services) and answers 503 if it
        failed; GET /api/v1/ready answers once it is done."""
        response = httpx.get(
            f"{self.base_url}/api/v1/ready", timeout=max(1.0, deadline - time.monotonic())
        )
        if response.status_code == 503:
            self.kill()
            raise RuntimeError(f"the server's start-up failed: {self.output()}")

    def api(self, admin_token: str | None = None) -> Api:
        return Api(self.base_url, admin_token)


def error_of(response: Any, status: int) -> dict[str, Any]:
    """The typed error of a response that must have this status."""
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error
