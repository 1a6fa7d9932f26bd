"""The API under heavy table work (issue 30, item 4): does heavy work stall the API?

Starts `dagwright serve` (its own process, a fresh SQLite data dir) with a small data pool
(DAGWRIGHT_DATA_THREADS=2, DAGWRIGHT_DATA_QUEUE_MAX=2, one DuckDB thread a query), then
measures, each for --seconds:

1. idle (the same process's baseline): the health probe (GET /api/v1/health every 50 ms)
   and a list route (GET /api/v1/evaluations every 100 ms);
2. loaded: the same, while --senders threads keep sending debug runs of a flow whose
   `sql_query` grinds a cross join until its time limit (3 s): the data pool stays full, the
   runs past its queue are refused 429 `pool_busy` (counted).

Prints p50/p99 of each beside the goal (probe p99 <= 100 ms under load) and exits 1 when the
loaded probe's p99 is over it. Before the pools (table work on the loop's default executor,
the one the handlers' `asyncio.to_thread` waits on) the list route waited behind the queries.

Run: .venv/bin/python benchmarks/api_under_heavy_work.py [--seconds 15] [--senders 8]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

GOAL_P99_MS = 100.0
SLOW_SQL = "SELECT sum(a.range * b.range) AS n FROM range(200000) a, range(200000) b"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DAGWRIGHT_DATA_DIR": str(data_dir),
        "DAGWRIGHT_REPLICA": "bench",
        "DAGWRIGHT_DATA_THREADS": "2",
        "DAGWRIGHT_DATA_QUEUE_MAX": "2",
        "DAGWRIGHT_QUERY_THREADS": "1",
    }
    for name in ("DAGWRIGHT_DATABASE_URL", "DAGWRIGHT_SETTINGS", "OPENAI_API_KEY"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-m", "dagwright", "serve", "--port", str(port)],
        env=env,
        cwd=data_dir,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_ready(base: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/api/v1/ready", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise SystemExit("the server did not start")


def sql_flow(timeout_s: float) -> dict[str, Any]:
    def edge(source: str, target: str) -> dict[str, Any]:
        (s_node, s_port), (t_node, t_port) = source.split("."), target.split(".")
        return {
            "source": {"node": s_node, "port": s_port},
            "target": {"node": t_node, "port": t_port},
        }

    return {
        "format": "dagwright.flow",
        "version": 1,
        "name": "heavy-sql",
        "nodes": [
            {"id": "sql", "block": "text_input", "config": {"name": "sql"}},
            {"id": "q", "block": "sql_query", "config": {"timeout_s": timeout_s, "max_rows": 10}},
            {"id": "out", "block": "output", "config": {"name": "out"}},
        ],
        "edges": [edge("sql.output", "q.sql"), edge("q.rows", "out.value")],
    }


def debug_run(client: httpx.Client, sql: str, timeout_s: float) -> httpx.Response:
    body = {"flow": sql_flow(timeout_s), "inputs": {"sql": sql}, "stream": False}
    return client.post("/api/v1/runs/debug", json=body)


def sample(base: str, path: str, interval: float, stop: threading.Event) -> list[float]:
    """Latencies (s) of GET `path` every `interval` until `stop`."""
    found: list[float] = []
    with httpx.Client(base_url=base, timeout=60) as client:
        while not stop.is_set():
            started = time.perf_counter()
            response = client.get(path)
            found.append(time.perf_counter() - started)
            if response.status_code != 200:
                raise SystemExit(f"GET {path} answered {response.status_code}")
            stop.wait(interval)
    return found


def measure(base: str, seconds: float, load: int) -> tuple[list[float], list[float], Counter[str]]:
    stop = threading.Event()
    answers: Counter[str] = Counter()
    results: dict[str, list[float]] = {}

    def sender() -> None:
        with httpx.Client(base_url=base, timeout=60) as client:
            while not stop.is_set():
                response = debug_run(client, SLOW_SQL, 3.0)
                if response.status_code == 200:
                    error = response.json().get("error") or {}
                    answers[f"200 {error.get('code', 'succeeded')}"] += 1
                else:
                    answers[f"{response.status_code} {response.json()['error']['code']}"] += 1
                    stop.wait(float(response.headers.get("Retry-After", "1")) / 4)

    def probe(name: str, path: str, interval: float) -> None:
        results[name] = sample(base, path, interval, stop)

    threads = [threading.Thread(target=sender) for _ in range(load)]
    threads += [
        threading.Thread(target=probe, args=("health", "/api/v1/health", 0.05)),
        threading.Thread(target=probe, args=("list", "/api/v1/evaluations", 0.1)),
    ]
    for thread in threads:
        thread.start()
    time.sleep(seconds)  # the measuring window itself
    stop.set()
    for thread in threads:
        thread.join(120)
    return results["health"], results["list"], answers


def ms(values: list[float], share: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[share - 1] * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--senders", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        server = start_server(Path(folder), port)
        try:
            wait_ready(base)
            with httpx.Client(base_url=base, timeout=60) as client:  # the data layer's start
                assert debug_run(client, "SELECT 1 AS one", 30).status_code == 200
            idle_health, idle_list, _ = measure(base, args.seconds, 0)
            health, listed, answers = measure(base, args.seconds, args.senders)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
    print(f"{'':34} {'p50 ms':>8} {'p99 ms':>8} {'n':>5}   goal")
    rows = [
        ("health probe, idle (baseline)", idle_health, ""),
        ("health probe, data pool full", health, f"p99 <= {GOAL_P99_MS:g} ms"),
        ("GET /evaluations, idle (baseline)", idle_list, ""),
        ("GET /evaluations, data pool full", listed, ""),
    ]
    for label, values, goal in rows:
        print(f"{label:34} {ms(values, 50):8.1f} {ms(values, 99):8.1f} {len(values):5}   {goal}")
    print("debug runs under load:", dict(answers))
    over = ms(health, 99) > GOAL_P99_MS
    print("probe p99 under load:", "OVER the goal" if over else "within the goal")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
