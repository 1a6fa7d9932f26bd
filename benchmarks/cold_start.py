"""Cold start: what a command costs before it does its work (issue 14, item 2).

(a) imports of `dagwright run` on a 10-node flow of text blocks, read from
    `python -X importtime`: the sum of the top-level imports, best of N (it is wall-clock
    time, and load from other processes only adds to it; goal <= 0.30 s), beside the floor
    every command pays (pydantic and typer, measured the same way); and the heavy
    packages such a flow must not load (FastAPI, SQLModel/SQLAlchemy, DuckDB, pyarrow,
    Qdrant, openai, numpy, networkx, httpx...) nor dagwright's own layers it does not use
    (AutoTQA, services, data, store, gateway...): any of them fails the benchmark. (importtime
    lists what `import` statements load: the block modules the registry loads through
    importlib are not listed themselves, their imports are);
(b) `dagwright run` of that flow as a whole process, spawn to exit (goal <= 0.5 s), beside
    `python -c "import pydantic, typer"`;
(c) `dagwright serve` to its first answered request (GET /api/v1/health), on a fresh data
    folder (migrations from scratch) and on one that exists (a restart) (goal <= 1.0 s),
    beside a bare FastAPI app under uvicorn started the same way. The server answers its
    health check first and prepares the rest in a thread in two stages (api/startup.py), so
    three more figures: spawn -> the first answer of GET /api/v1/apps (start-up's core stage:
    the database, the registry, the services and the routes of apps, runs, keys and
    published calls; a user's first call; goal <= 1.0 s), spawn -> all ready (the first
    answer of GET /api/v1/ready: the other routes and the data layer's DuckDB/Arrow/sqlglot
    too; no goal), and the slowest health check asked every 20 ms meanwhile (start-up's
    thread may hold the GIL; goal < 1 s, tests/support/probe.py's limit). And the heavy packages the
    first answer needs, i.e. what `create_app()` imports (the rest is start-up's thread):
    the data layer, the database layer, the example store's engines and the model clients
    (any of them fails the benchmark).

Every process runs with its bytecode cached, as an installed dagwright's (pip compiles it):
PYTHONDONTWRITEBYTECODE is left out of the processes' environment and the first run of each
kind is a warm-up, which writes the cache. (With it set, every dagwright module and block
is compiled from source at each start: ~0.1 s more on these 2 cores.)

Process figures are medians of N runs, each printed as wall time and CPU time (user +
system of the process). The goals are judged on the CPU time: on a shared machine the wall
clock also counts the time other processes hold the CPU (wall is printed beside it; on an
idle machine the two agree within the I/O a start-up does).

Run: .venv/bin/python benchmarks/cold_start.py [--runs N] [--sections abc]
     (exits 1 when over a goal; --sections ab skips the server)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

GOAL_IMPORT_S = 0.30
GOAL_RUN_S = 0.5
GOAL_SERVE_S = 1.0
# Packages a flow of text blocks must not import (each costs 50 ms to over a second).
FORBIDDEN = (
    "fastapi",
    "starlette",
    "uvicorn",
    "sqlmodel",
    "sqlalchemy",
    "alembic",
    "duckdb",
    "pyarrow",
    "pandas",
    "qdrant_client",
    "qdrant_edge",
    "openai",
    "numpy",
    "networkx",
    "httpx",
    "jsonschema",
    # dagwright's own layers such a flow does not use (the block modules that do import
    # them where they are called): AutoTQA, the services, the data and database layers, the
    # example store, the model gateway, MCP, the methods, the API, evaluations.
    "dagwright.tqa",
    "dagwright.services",
    "dagwright.data",
    "dagwright.store",
    "dagwright.embedding",
    "dagwright.llm.gateway",
    "dagwright.mcp",
    "dagwright.methods",
    "dagwright.api",
    "dagwright.evaluation",
)
# Packages the server's first answer must not need: the data layer, the database layer
# (the database opens in start-up's thread), the example store's engines and models.
SERVE_FORBIDDEN = (
    "duckdb",
    "pyarrow",
    "pandas",
    "numpy",
    "sqlglot",
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "procrastinate",
    "psycopg",
    "qdrant_client",
    "qdrant_edge",
    "openai",
    "tokenizers",
    "safetensors",
    "httpx",
)
# How often the health check is asked while the server prepares the rest.
PROBE_EVERY_S = 0.02
PROBE_GOAL_S = 1.0
PYTHON = sys.executable

TEN_NODES = {
    "format": "dagwright.flow",
    "version": 1,
    "name": "ten",
    "nodes": [
        {"id": "name", "block": "text_input", "config": {"name": "name", "default": "world"}},
        {
            "id": "greet",
            "block": "template",
            "config": {"template": "Hello, {{ name }}! Welcome to Dagwright, {{ name }}."},
        },
        {"id": "words", "block": "text_split", "config": {"separator": " "}},
        {"id": "joined", "block": "text_join", "config": {"separator": "-"}},
        {"id": "count", "block": "list_length", "config": {}},
        {"id": "caps", "block": "regex_find_all", "config": {"pattern": "[A-Z][a-z]+"}},
        {"id": "caps_json", "block": "to_json", "config": {}},
        {"id": "out_text", "block": "output", "config": {"name": "text"}},
        {"id": "out_count", "block": "output", "config": {"name": "words"}},
        {"id": "out_caps", "block": "output", "config": {"name": "capitalised"}},
    ],
    "edges": [
        {"source": {"node": s, "port": "output"}, "target": {"node": t, "port": p}}
        for s, t, p in (
            ("name", "greet", "name"),
            ("greet", "words", "text"),
            ("words", "joined", "texts"),
            ("words", "count", "items"),
            ("greet", "caps", "text"),
            ("caps", "caps_json", "value"),
            ("joined", "out_text", "value"),
            ("count", "out_count", "value"),
            ("caps_json", "out_caps", "value"),
        )
    ],
}

BARE_APP = """
from fastapi import FastAPI

app = FastAPI()


@app.get("/api/v1/health")
def health() -> dict[str, str]:
    return {"status": "ok"}
"""


@dataclass(slots=True)
class Timing:
    wall: float
    cpu: float


def median(timings: list[Timing]) -> Timing:
    return Timing(
        statistics.median(t.wall for t in timings), statistics.median(t.cpu for t in timings)
    )


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_process(command: list[str], env: dict[str, str] | None = None) -> Timing:
    cpu0, wall0 = _children_cpu(), time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - wall0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    return Timing(wall, _children_cpu() - cpu0)


def import_seconds(command: list[str], env: dict[str, str]) -> tuple[float, set[str]]:
    """Sum of the top-level imports under -X importtime, and every module imported."""
    done = subprocess.run(
        [PYTHON, "-X", "importtime", *command], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr}")
    total, modules = 0, set()
    for line in done.stderr.splitlines():
        match = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if not match:
            continue
        modules.add(match.group(4))
        if len(match.group(3)) == 1:  # a top-level import: its figure includes its children
            total += int(match.group(2))
    return total / 1e6, modules


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _process_cpu(pid: int) -> float | None:
    """CPU seconds of a running process so far (Linux /proc), else None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


def _get(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read()
            return bool(response.status == 200)
    except OSError:
        return False


@dataclass(slots=True)
class Start:
    first: Timing  # spawn -> first answered health check
    core: Timing | None  # spawn -> first answered GET /api/v1/apps (start-up's core stage)
    ready: Timing | None  # spawn -> first answered GET /api/v1/ready (every stage)
    worst_probe: float  # the slowest health check between the first answer and /ready


def time_server(
    command: list[str], port: int, env: dict[str, str], cwd: str | None, *, ready: bool = False
) -> Start:
    """Spawn -> first answered GET /api/v1/health (and, with `ready`, -> the first answer of
    GET /api/v1/apps, then of GET /api/v1/ready, each asked once and held by the server
    until it can answer, asking the health check every PROBE_EVERY_S meanwhile)."""
    base = f"http://127.0.0.1:{port}"
    began = time.perf_counter()
    server = subprocess.Popen(
        command, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )

    def died() -> None:
        if server.poll() is not None:
            assert server.stderr is not None
            raise SystemExit(f"{' '.join(command)} exited:\n{server.stderr.read().decode()}")
        if time.perf_counter() - began > 60:
            raise SystemExit(f"no answer from {base} within 60 s")

    try:
        while not _get(f"{base}/api/v1/health"):
            died()
            time.sleep(0.005)
        first = Timing(time.perf_counter() - began, _process_cpu(server.pid) or float("nan"))
        if not ready:
            return Start(first, None, None, 0.0)
        worst = 0.0
        done = threading.Event()

        def probe() -> None:
            nonlocal worst
            while not done.is_set():
                asked = time.perf_counter()
                _get(f"{base}/api/v1/health")
                worst = max(worst, time.perf_counter() - asked)
                done.wait(PROBE_EVERY_S)

        prober = threading.Thread(target=probe, daemon=True)
        prober.start()
        answered = []
        for path in ("/api/v1/apps", "/api/v1/ready"):
            if not _get(f"{base}{path}"):
                died()
                raise SystemExit(f"GET {path} failed")
            answered.append(
                Timing(time.perf_counter() - began, _process_cpu(server.pid) or float("nan"))
            )
        done.set()
        prober.join()
        return Start(first, answered[0], answered[1], worst)
    finally:
        server.terminate()
        server.wait(timeout=15)


def first_answer_imports(env: dict[str, str]) -> set[str]:
    """Every module the server's first answer needs: what `create_app()` imports (the
    lifespan's thread imports the rest after the server listens; -X importtime)."""
    code = "from dagwright.api.app import create_app; create_app()"
    done = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", code], env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"create_app() failed:\n{done.stderr}")
    found = (
        re.match(r"import time:\s+\d+ \|\s+\d+ \| *(\S+)", line)
        for line in done.stderr.splitlines()
    )
    return {match.group(1) for match in found if match}


def row(label: str, measured: Timing, baseline: Timing, goal: float | None) -> bool:
    """Prints one figure; True when it is over its goal (judged on CPU time)."""
    text = (
        f"  {label}: {measured.cpu:.3f} s CPU, {measured.wall:.3f} s wall; "
        f"x{measured.cpu / baseline.cpu:.2f} of the baseline (CPU)"
    )
    over = False
    if goal is not None:
        over = not measured.cpu <= goal
        text += f"; goal <= {goal:g} s: x{measured.cpu / goal:.2f} {'OVER GOAL' if over else 'ok'}"
    print(text)
    return over


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--sections", default="abc", help="which of (a), (b), (c) to run")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dagwright-cold-"))
    flow = folder / "ten.json"
    flow.write_text(json.dumps(TEN_NODES))
    run_command = ["-m", "dagwright", "run", str(flow), "-i", "name=Ann"]
    floor_command = ["-c", "import pydantic, typer"]
    env = {**os.environ, "DAGWRIGHT_DATA_DIR": str(folder / "data")}
    env.pop("DAGWRIGHT_BLOCKS_PATH", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached (the docstring)
    failed = False
    # Other processes' load shows in the wall times (the goals are judged on CPU time).
    print("machine load (1, 5, 15 min): {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg()))
    if "a" in args.sections:
        failed |= imports_section(args.runs, run_command, floor_command, env)
    if "b" in args.sections:
        failed |= process_section(args.runs, run_command, floor_command, env)
    if "c" in args.sections:
        failed |= serve_section(args.runs, folder, env)
    shutil.rmtree(folder, ignore_errors=True)
    return 1 if failed else 0


def imports_section(
    runs: int, run_command: list[str], floor_command: list[str], env: dict[str, str]
) -> bool:
    failed = False
    time_process([PYTHON, *run_command], env)  # warm-up: writes the bytecode cache
    print(f"(a) imports of `dagwright run` on a 10-node flow, best of {runs} (median)")
    imports, floor = [], []
    loaded: set[str] = set()
    for _ in range(runs):
        seconds, modules = import_seconds(run_command, env)
        imports.append(seconds)
        loaded |= modules
        floor.append(import_seconds(floor_command, env)[0])
    spent, floor_spent = min(imports), min(floor)
    over = spent > GOAL_IMPORT_S
    failed |= over
    print(
        f"  {spent:.3f} s of imports ({statistics.median(imports):.3f}); pydantic + typer "
        f"alone: {floor_spent:.3f} s ({statistics.median(floor):.3f}), x{spent / floor_spent:.2f}"
        f" of it; goal <= {GOAL_IMPORT_S:g} s: x{spent / GOAL_IMPORT_S:.2f} "
        f"{'OVER GOAL' if over else 'ok'}"
    )
    heavy = sorted(name for name in FORBIDDEN if name in loaded)
    failed |= bool(heavy)
    print(f"  heavy packages imported: {', '.join(heavy) if heavy else 'none'}")
    return failed


def process_section(
    runs: int, run_command: list[str], floor_command: list[str], env: dict[str, str]
) -> bool:
    print(f"\n(b) `dagwright run` of the 10-node flow as a whole process, median of {runs}")
    time_process([PYTHON, *run_command], env)  # warm the file and bytecode caches
    timings, floors = [], []
    for _ in range(runs):
        timings.append(time_process([PYTHON, *run_command], env))
        floors.append(time_process([PYTHON, *floor_command], env))
    floor_timing = median(floors)
    row("python -c 'import pydantic, typer' (baseline)", floor_timing, floor_timing, None)
    return row("dagwright run ten.json", median(timings), floor_timing, GOAL_RUN_S)


def serve_section(runs: int, folder: Path, env: dict[str, str]) -> bool:
    failed = False
    print(f"\n(c) server: spawn -> first answered GET /api/v1/health, median of {runs}")
    bare = folder / "bare_app.py"
    bare.write_text(BARE_APP)
    fresh: list[Start] = []
    restart: list[Start] = []
    bare_runs: list[Timing] = []
    kept = folder / "kept"
    for index in range(runs + 1):  # the first of each is a warm-up
        port = free_port()
        serve = [PYTHON, "-m", "dagwright", "serve", "--port", str(port)]
        data = folder / f"fresh{index}"
        start = time_server(serve, port, {**env, "DAGWRIGHT_DATA_DIR": str(data)}, None, ready=True)
        shutil.rmtree(data, ignore_errors=True)
        if index:
            fresh.append(start)
        port = free_port()
        serve = [PYTHON, "-m", "dagwright", "serve", "--port", str(port)]
        start = time_server(serve, port, {**env, "DAGWRIGHT_DATA_DIR": str(kept)}, None, ready=True)
        if index:
            restart.append(start)
        port = free_port()
        uvicorn = [PYTHON, "-m", "uvicorn", "bare_app:app", "--port", str(port)]
        start = time_server(uvicorn, port, {**env, "PYTHONPATH": str(folder)}, str(folder))
        if index:
            bare_runs.append(start.first)
    bare_timing = median(bare_runs)
    row("bare FastAPI app under uvicorn (baseline)", bare_timing, bare_timing, None)
    for label, starts in (("fresh data folder", fresh), ("restart", restart)):
        failed |= row(
            f"dagwright serve, {label}: first answer",
            median([s.first for s in starts]),
            bare_timing,
            GOAL_SERVE_S,
        )
        failed |= row(
            f"dagwright serve, {label}: first GET /api/v1/apps answer (core stage)",
            median([s.core for s in starts if s.core is not None]),
            bare_timing,
            GOAL_SERVE_S,
        )
        row(
            f"dagwright serve, {label}: all ready (GET /api/v1/ready)",
            median([s.ready for s in starts if s.ready is not None]),
            bare_timing,
            None,
        )
        worst = max(s.worst_probe for s in starts)
        over = not worst < PROBE_GOAL_S
        failed |= over
        print(
            f"  slowest health check while it prepared the rest: {worst:.3f} s wall; goal < "
            f"{PROBE_GOAL_S:g} s: {'OVER GOAL' if over else 'ok'}"
        )
    loaded = first_answer_imports({**env, "DAGWRIGHT_DATA_DIR": str(kept)})
    heavy = sorted(name for name in SERVE_FORBIDDEN if name in loaded)
    failed |= bool(heavy)
    print(
        f"  packages the first answer needs, of {', '.join(SERVE_FORBIDDEN)}: "
        f"{', '.join(heavy) if heavy else 'none'} ({len(loaded)} modules in all)"
    )
    return failed


if __name__ == "__main__":
    raise SystemExit(main())
