"""Published-endpoint throughput and server cold start, on SQLite with every run recorded.

1. Starts `dagwright serve` (its own process, a fresh SQLite data dir), publishes a trivial
   flow (flows/examples/hello.json) and creates an API key.
2. Loads POST /api/v1/apps/hello/run with 100 concurrent connections for 20 s using wrk
   (Debian package `wrk`: `apt-get install wrk`; `make bench` installs it), and prints
   requests/s and p50/p99. Without wrk it says how to get it and measures with a Python
   load generator instead (keep-alive HTTP/1.1 over asyncio streams); that one shares the
   CPU with the server in Python, so its figures are printed but not judged against the
   target (`--load-generator wrk|python` chooses).
3. Checks that every answered request is a recorded run (the runs table's count).
4. Restarts the server (one process) on the same data and times spawn -> first answered
   published call (which waits for the whole start-up: the health check answers before,
   api/startup.py; benchmarks/cold_start.py measures both).
The server runs one process per core (`dagwright serve --workers N`; --workers here).

Targets: at least 1,500 requests/s with p99 <= 100 ms; cold start under 1.5 s.
Run: .venv/bin/python benchmarks/server_throughput.py [--seconds 20] [--connections 100]
     [--load-generator auto|wrk|python]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TARGET_RPS = 1500.0
TARGET_P99_MS = 100.0
TARGET_COLD_START = 1.5


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(data_dir: Path, port: int, workers: int) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DAGWRIGHT_DATA_DIR": str(data_dir),
        "DAGWRIGHT_REPLICA": "bench",
        "DAGWRIGHT_RATE_LIMIT": "1000000",
    }
    env.pop("DAGWRIGHT_DATABASE_URL", None)
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dagwright",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def wait_for(url: str, deadline: float, **request: object) -> float:
    while time.perf_counter() < deadline:
        try:
            response = httpx.post(url, timeout=1, **request)  # type: ignore[arg-type]
            if response.status_code == 200:
                return time.perf_counter()
        except httpx.HTTPError:
            pass
        time.sleep(0.01)
    raise SystemExit(f"no answer from {url}")


def setup(base: str) -> str:
    # The first call waits for the rest of start-up (api/startup.py): on a loaded machine,
    # seconds.
    with httpx.Client(base_url=base, timeout=60) as client:
        client.post("/api/v1/apps", json={"slug": "hello", "name": "Hello"}).raise_for_status()
        flow = json.loads((ROOT / "flows" / "examples" / "hello.json").read_text())
        version = client.post("/api/v1/apps/hello/versions", json={"flow": flow})
        version.raise_for_status()
        client.post(
            "/api/v1/apps/hello/publish", json={"version_id": version.json()["id"]}
        ).raise_for_status()
        key = client.post("/api/v1/apps/hello/keys", json={"name": "bench"})
        key.raise_for_status()
        return str(key.json()["key"])


def run_wrk(url: str, key: str, seconds: int, connections: int) -> dict[str, float]:
    script = Path(tempfile.mkdtemp()) / "post.lua"
    script.write_text(
        'wrk.method = "POST"\n'
        'wrk.body = \'{"inputs": {"name": "Ann"}}\'\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
        f'wrk.headers["Authorization"] = "Bearer {key}"\n'
    )
    done = subprocess.run(
        [
            "wrk",
            "-t",
            "1",
            "-c",
            str(connections),
            "-d",
            f"{seconds}s",
            "--latency",
            "-s",
            str(script),
            url,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    out = done.stdout

    def latency(label: str) -> float:
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)", out, flags=re.MULTILINE)
        if not match:
            raise SystemExit(f"cannot read the {label}th percentile from wrk:\n{out}")
        value, unit = float(match.group(1)), match.group(2)
        return value / {"us": 1000, "ms": 1, "s": 0.001}[unit]

    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    return {
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50": latency("50"),
        "p99": latency("99"),
        "requests": requests,
        "errors": int(errors.group(1)) if errors else 0,
    }


async def _python_load(url: str, key: str, seconds: int, connections: int) -> dict[str, float]:
    """wrk's figures from asyncio streams: each connection sends the POST and reads its
    answer (Content-Length or chunked) in a loop, keep-alive, for `seconds`."""
    target = urllib.parse.urlsplit(url)
    host, port = target.hostname or "127.0.0.1", target.port or 80
    body = json.dumps({"inputs": {"name": "Ann"}}).encode()
    request = (
        f"POST {target.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Content-Type: application/json\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bool]:
        status = int((await reader.readline()).split()[1])
        length, chunked, close = 0, False, False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding":
                chunked = "chunked" in value
            elif name == "connection":
                close = value == "close"
        if chunked:
            while size := int((await reader.readline()).split(b";")[0], 16):
                await reader.readexactly(size + 2)
            await reader.readline()
        else:
            await reader.readexactly(length)
        return status, close

    async def connection() -> None:
        nonlocal errors
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while time.perf_counter() < deadline:
                sent = time.perf_counter()
                writer.write(request)
                status, close = await read_answer(reader)
                latencies.append(time.perf_counter() - sent)
                errors += not 200 <= status < 400
                if close:
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
        finally:
            writer.close()

    began = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(connections)))
    elapsed = time.perf_counter() - began
    latencies.sort()

    def percentile(share: float) -> float:
        return latencies[min(len(latencies) - 1, int(share * len(latencies)))] * 1e3

    return {
        "rps": len(latencies) / elapsed,
        "p50": percentile(0.50),
        "p99": percentile(0.99),
        "requests": len(latencies),
        "errors": errors,
    }


def run_python_load(url: str, key: str, seconds: int, connections: int) -> dict[str, float]:
    return asyncio.run(_python_load(url, key, seconds, connections))


BARE_APP = """
from fastapi import FastAPI
from pydantic import BaseModel


class RunIn(BaseModel):
    inputs: dict[str, object]


app = FastAPI()


@app.post("/api/v1/apps/hello/run")
async def run(body: RunIn) -> dict[str, object]:
    return {"status": "succeeded", "outputs": {"greeting": f"Hello, {body.inputs['name']}!"}}
"""


def bare_app_load(
    load: Callable[[str, str, int, int], dict[str, float]], args: argparse.Namespace
) -> tuple[dict[str, float], float]:
    """The baseline, under the same load: a bare FastAPI app answering the same POST with a
    constant-time JSON body (no key, no run, nothing recorded), same uvicorn, same workers;
    its figures and CPU per request."""
    folder = Path(tempfile.mkdtemp())
    (folder / "bare_app.py").write_text(BARE_APP)
    port = free_port()
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "uvicorn", "bare_app:app", "--port", str(port)),
            *("--workers", str(args.workers), "--log-level", "warning"),
        ],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(folder)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/api/v1/apps/hello/run"
    try:
        wait_for(url, time.perf_counter() + 60, json={"inputs": {"name": "w"}})
        cpu = tree_cpu_seconds(server.pid)
        figures = load(url, "none", args.seconds, args.connections)
        cpu = tree_cpu_seconds(server.pid) - cpu
    finally:
        server.terminate()
        server.wait(timeout=15)
    return figures, cpu / max(1, figures["requests"])


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU so far of a process and its live children (the server's workers)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        pid, parent = int(stat.parent.name), int(fields[1])
        if root in (pid, parent):
            total += int(fields[11]) + int(fields[12])
    return total / ticks


def count_runs(data_dir: Path) -> int:
    import sqlite3

    with sqlite3.connect(data_dir / "dagwright.db") as db:
        (count,) = db.execute("SELECT count(*) FROM runs WHERE status = 'succeeded'").fetchone()
        return int(count)


def main() -> int:  # noqa: PLR0915
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--connections", type=int, default=100)
    # One server process per core: each is single-threaded Python (plus its writer thread).
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--load-generator", choices=("auto", "wrk", "python"), default="auto")
    args = parser.parse_args()
    generator = args.load_generator
    if generator != "python" and shutil.which("wrk") is None:
        if generator == "wrk":
            raise SystemExit("wrk is not installed: apt-get install wrk (make bench does)")
        print(
            "wrk is not installed: `apt-get install wrk` (Debian's package; `make bench` "
            "installs it) gives the figures the target was set with. Measuring with the "
            "Python load generator instead: it shares the CPU with the server, so its "
            "requests/s are printed, not judged.\n"
        )
        generator = "python"
    elif generator == "auto":
        generator = "wrk"
    data_dir = Path(tempfile.mkdtemp())
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    url = f"{base}/api/v1/apps/hello/run"
    server = start_server(data_dir, port, args.workers)
    try:
        deadline = time.perf_counter() + 90  # a loaded machine starts slowly
        while time.perf_counter() < deadline:
            try:
                httpx.get(f"{base}/api/v1/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        key = setup(base)
        headers = {"Authorization": f"Bearer {key}"}
        for _ in range(200):  # warm-up
            httpx.post(url, json={"inputs": {"name": "w"}}, headers=headers)
        before = count_runs(data_dir)
        load = run_wrk if generator == "wrk" else run_python_load
        server_cpu = tree_cpu_seconds(server.pid)
        figures = load(url, key, args.seconds, args.connections)
        time.sleep(0.5)  # the last group commit
        server_cpu = tree_cpu_seconds(server.pid) - server_cpu
        recorded = count_runs(data_dir) - before
    finally:
        server.terminate()
        server.wait(timeout=15)

    bare, bare_cpu = bare_app_load(load, args)
    answered = int(figures["requests"] - figures["errors"])
    print(
        f"published trivial flow, {args.connections} connections for {args.seconds} s "
        f"({generator} on the same machine), SQLite, {args.workers} server process(es)"
    )
    ok = figures["rps"] >= TARGET_RPS and figures["p99"] <= TARGET_P99_MS
    verdict = ("ok" if ok else "MISSED") if generator == "wrk" else "not judged: no wrk"
    ok |= generator != "wrk"
    print(
        f"  {figures['rps']:.0f} requests/s, p50 {figures['p50']:.1f} ms, "
        f"p99 {figures['p99']:.1f} ms (target >= {TARGET_RPS:g}/s with p99 <= "
        f"{TARGET_P99_MS:g} ms: {verdict}), non-2xx {int(figures['errors'])}"
    )
    # More runs than answers: the calls still in flight when wrk stopped were recorded too.
    print(f"  runs recorded: {recorded} for {answered} answered requests")
    # The figure to trust on a shared machine: the server's own CPU per request. 2 cores
    # serving TARGET_RPS leave 2 / TARGET_RPS s per request for server and load generator.
    per_request = server_cpu / max(1, figures["requests"]) * 1e3
    budget = 2 / TARGET_RPS * 1e3
    print(
        f"  server CPU per request (all its processes): {per_request:.2f} ms; 2 cores at "
        f"{TARGET_RPS:g} runs/s allow {budget:.2f} ms with the load generator's share"
    )
    print(
        f"  baseline, a bare FastAPI app answering the same POST (same load, same workers): "
        f"{bare['rps']:.0f} requests/s, p50 {bare['p50']:.1f} ms, p99 {bare['p99']:.1f} ms, "
        f"CPU per request {bare_cpu * 1e3:.2f} ms; dagwright x{per_request / (bare_cpu * 1e3):.2f}"
        f" its CPU per request, x{figures['p99'] / bare['p99']:.2f} its p99"
    )

    began = time.perf_counter()
    server = start_server(data_dir, port, 1)
    try:
        answered_at = wait_for(url, began + 90, json={"inputs": {"name": "c"}}, headers=headers)
    finally:
        server.terminate()
        server.wait(timeout=15)
    cold = answered_at - began
    cold_ok = cold <= TARGET_COLD_START
    print(
        f"  cold start, one process (spawn -> first answered call): {cold:.2f} s "
        f"(target <= {TARGET_COLD_START:g} s: {'ok' if cold_ok else 'OVER TARGET'})"
    )
    return 0 if ok and cold_ok and recorded >= answered else 1


if __name__ == "__main__":
    raise SystemExit(main())
