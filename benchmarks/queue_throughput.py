"""Async published runs through the job queue: runs/s with 1 and 2 workers, and how long a
run waits between being queued and a worker starting it (p50/p99).

1. Makes a fresh schema in the PostgreSQL at DAGWRIGHT_BENCH_POSTGRES_URL (default: the
   local test server), starts one `dagwright serve` on it and publishes a trivial flow
   (flows/examples/hello.json).
2. Baseline, in this same process: the server without the queue (the embedded default's
   way: an async run executes in the API process) — RUNS async calls from 32 concurrent
   clients, timed from the first call to the last run recorded as finished.
3. The same server restarted in queue mode, with 1 worker, then 2 workers
   (`dagwright worker`): the same load, the same timing; then 60 calls one every 0.2 s
   (a rate the workers keep up with) for the enqueue-to-start latency, each run's
   started_at - created_at, both written by the database's clients on this host.
4. The workers' own rate: a backlog queued with no worker running, emptied by 1, then 2
   fresh workers (counted once every worker has registered), the API idle.
Every process shares the machine's cores (2 here) with PostgreSQL and the load generator:
a second worker adds executors, not cores.

Beside each rate, the CPU milliseconds per run of the API process and of the workers (from
/proc): the rates move with whatever else runs on the machine, the CPU a run costs much less.

Goals: 1 worker at least 100 runs/s; 2 workers at least as fast as 1; enqueue-to-start
p50 under 50 ms and p99 under 500 ms at a rate the workers keep up with.
Run: .venv/bin/python benchmarks/queue_throughput.py [--runs 500]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import httpx
from cryptography.fernet import Fernet
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.pool import NullPool

ROOT = Path(__file__).resolve().parents[1]
POSTGRES = os.environ.get(
    "DAGWRIGHT_BENCH_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test"
)
CLIENTS = 32
GOAL_ONE_WORKER = 100.0  # runs/s
GOAL_P50 = 0.050  # seconds, enqueue -> start
GOAL_P99 = 0.500
PACE = 0.2  # seconds between the calls whose enqueue-to-start wait is measured


@contextmanager
def fresh_schema() -> Iterator[str]:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    admin = create_engine(POSTGRES, poolclass=NullPool)
    with admin.begin() as conn:
        conn.execute(text(f"CREATE SCHEMA {schema}"))
    try:
        yield f"{POSTGRES}?options={quote(f'-csearch_path={schema}', safe='')}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()


def launch(args: list[str], env: dict[str, str], folder: Path) -> subprocess.Popen[bytes]:
    folder.mkdir(parents=True, exist_ok=True)
    log = (folder / f"{args[0]}.log").open("ab")
    return subprocess.Popen(
        [sys.executable, "-m", "dagwright", *args], env=env, cwd=folder, stdout=log, stderr=log
    )


def wait_healthy(base: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/api/v1/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the server did not start")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


async def call_all(base: str, key: str, runs: int) -> list[str]:
    """`runs` async calls from CLIENTS concurrent clients; returns the accepted runs' ids. A
    call whose connection broke is sent again (its run, if it was queued, is not counted)."""
    pending = iter(range(runs))
    headers = {"Authorization": f"Bearer {key}"}
    accepted: list[str] = []
    async with httpx.AsyncClient(base_url=base, timeout=60, headers=headers) as client:

        async def client_loop() -> None:
            for index in pending:
                body = {"inputs": {"name": f"n{index}"}, "async": True}
                while True:
                    try:
                        response = await client.post("/api/v1/apps/hello/run", json=body)
                        break
                    except httpx.TransportError:
                        continue
                if response.status_code != 202:
                    raise RuntimeError(f"{response.status_code}: {response.text}")
                accepted.append(response.json()["run_id"])

        await asyncio.gather(*(client_loop() for _ in range(CLIENTS)))
    return accepted


def count_finished(db: Engine, run_ids: list[str]) -> int:
    with db.connect() as conn:
        return int(
            conn.execute(
                text("SELECT count(*) FROM runs WHERE status = 'succeeded' AND id = ANY(:ids)"),
                {"ids": run_ids},
            ).scalar_one()
        )


def cpu_seconds(process: subprocess.Popen[bytes]) -> float:
    """The CPU time (user + system, all threads) a child process has used so far."""
    fields = Path(f"/proc/{process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    base: str, key: str, db: Engine, runs: int, processes: dict[str, list[subprocess.Popen[bytes]]]
) -> tuple[float, list[float], dict[str, float]]:
    """Runs/s from the first call to the last run finished, each run's wait from queued to
    started (empty when the runs were not queued), and the CPU milliseconds per run each
    kind of process (api, workers) used: unlike the rate, barely moved by other load on
    the machine."""
    before = {kind: sum(map(cpu_seconds, group)) for kind, group in processes.items()}
    started = time.perf_counter()
    run_ids = asyncio.run(call_all(base, key, runs))
    while count_finished(db, run_ids) < len(run_ids):
        time.sleep(0.02)
    elapsed = time.perf_counter() - started
    cpu = {
        kind: (sum(map(cpu_seconds, group)) - before[kind]) * 1000 / len(run_ids)
        for kind, group in processes.items()
    }
    with db.connect() as conn:
        waits = conn.execute(
            text(
                "SELECT extract(epoch FROM started_at - created_at) FROM runs "
                "WHERE job_id IS NOT NULL AND id = ANY(:ids)"
            ),
            {"ids": run_ids},
        ).scalars()
        latencies = sorted(float(w) for w in waits)
    return len(run_ids) / elapsed, latencies, cpu


def paced_waits(base: str, key: str, db: Engine, count: int, interval: float) -> list[float]:
    """Enqueue-to-start waits of `count` runs sent one every `interval` seconds: a rate the
    workers keep up with, so the wait is the queue's own (notify, fetch, claim), not a
    backlog's."""
    headers = {"Authorization": f"Bearer {key}"}
    run_ids = []
    with httpx.Client(base_url=base, timeout=60, headers=headers) as client:
        for index in range(count):
            body = {"inputs": {"name": f"p{index}"}, "async": True}
            run_ids.append(client.post("/api/v1/apps/hello/run", json=body).json()["run_id"])
            time.sleep(interval)
    while count_finished(db, run_ids) < len(run_ids):
        time.sleep(0.02)
    with db.connect() as conn:
        waits = conn.execute(
            text(
                "SELECT extract(epoch FROM started_at - created_at) FROM runs WHERE id = ANY(:ids)"
            ),
            {"ids": run_ids},
        ).scalars()
        return sorted(float(w) for w in waits)


def drain(
    base: str, key: str, db: Engine, runs: int, count: int, env: dict[str, str], folder: Path
) -> float:
    """Runs/s of `count` workers emptying a backlog of `runs` queued with no worker running:
    the workers' own rate, the API out of the way. Counted from the moment every worker has
    registered (they start one after the other) to the last run's end."""
    run_ids = asyncio.run(call_all(base, key, runs))
    workers = [launch(["worker"], env, folder / f"drain-{count}-{i}") for i in range(count)]
    try:
        with db.connect() as conn:
            registered = text("SELECT count(*) FROM procrastinate_workers")
            while conn.execute(registered).scalar_one() < count:
                conn.commit()
                time.sleep(0.05)
        start, done_before = datetime.now(UTC), count_finished(db, run_ids)
        while count_finished(db, run_ids) < len(run_ids):
            time.sleep(0.05)
        with db.connect() as conn:
            last: datetime = conn.execute(
                text("SELECT max(finished_at) FROM runs WHERE id = ANY(:ids)"), {"ids": run_ids}
            ).scalar_one()
    finally:
        for worker in workers:
            stop(worker)
    if last.tzinfo is None:  # stored naive, in UTC
        last = last.replace(tzinfo=UTC)
    rate: float = (len(run_ids) - done_before) / (last - start).total_seconds()
    print(f"drain, {count} worker(s): {rate:.1f} runs/s", flush=True)
    return rate


def percentile(values: list[float], share: float) -> float:
    return values[min(len(values) - 1, int(share * len(values)))]


def report(
    runs: int,
    backlog: int,
    baseline: tuple[float, dict[str, float]],
    results: dict[int, tuple[float, list[float], dict[str, float]]],
    drains: dict[int, float],
) -> None:
    baseline_rate, baseline_cpu = baseline
    print(f"{runs} async published runs (hello.json), {CLIENTS} concurrent clients")
    print(
        f"baseline, in the API process (no queue): {baseline_rate:7.1f} runs/s  "
        f"CPU per run: api {baseline_cpu['api']:.2f} ms"
    )
    for count, (rate, waits, cpu) in results.items():
        goal = GOAL_ONE_WORKER if count == 1 else results[1][0]
        p50, p99 = percentile(waits, 0.5), percentile(waits, 0.99)
        print(
            f"queue, {count} worker(s): {rate:7.1f} runs/s (goal >= {goal:.0f}; "
            f"{rate / baseline_rate:.2f}x baseline)  enqueue->start at 1 call/{PACE:g}s: "
            f"p50 {p50 * 1000:6.1f} ms "
            f"(goal < {GOAL_P50 * 1000:.0f})  p99 {p99 * 1000:6.1f} ms "
            f"(goal < {GOAL_P99 * 1000:.0f})  [{len(waits)} runs]  CPU per run: "
            f"api {cpu['api']:.2f} ms + workers {cpu['workers']:.2f} ms "
            f"({(cpu['api'] + cpu['workers']) / baseline_cpu['api']:.2f}x baseline; "
            "PostgreSQL's not counted)"
        )
    for count, rate in drains.items():
        print(
            f"draining {backlog} queued runs, {count} worker(s) (the API idle): "
            f"{rate:7.1f} runs/s ({rate / drains[1]:.2f}x 1 worker; goal >= "
            f"{GOAL_ONE_WORKER if count == 1 else drains[1]:.0f})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--drain", type=int, default=2000, help="the backlog the workers empty")
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="dagwright-queue-bench-"))
    with fresh_schema() as url:
        db = create_engine(url, poolclass=NullPool)
        env = {
            **os.environ,
            "DAGWRIGHT_DATABASE_URL": url,
            "DAGWRIGHT_RATE_LIMIT": "1000000",
            "DAGWRIGHT_SECRET_KEY": Fernet.generate_key().decode(),
            "DAGWRIGHT_QUEUE_APP_LIMIT": "1000000",
            "DAGWRIGHT_QUEUE_MAX_DEPTH": "1000000",
        }
        env.pop("DAGWRIGHT_QUEUE", None)
        queued = {**env, "DAGWRIGHT_QUEUE": "procrastinate"}
        port = 18000 + os.getpid() % 1000
        base = f"http://127.0.0.1:{port}"
        server = launch(["serve", "--port", str(port)], env, folder / "api")
        try:
            wait_healthy(base)
            flow = json.loads((ROOT / "flows/examples/hello.json").read_text())
            admin = httpx.Client(base_url=base, timeout=30)
            admin.post("/api/v1/apps", json={"slug": "hello", "name": "hello"})
            version = admin.post("/api/v1/apps/hello/versions", json={"flow": flow}).json()
            admin.post("/api/v1/apps/hello/publish", json={"version_id": version["id"]})
            key = admin.post("/api/v1/apps/hello/keys", json={"name": "bench"}).json()["key"]
            admin.close()
            measure(base, key, db, 100, {})  # warm-up
            baseline, _, baseline_cpu = measure(base, key, db, options.runs, {"api": [server]})
            print(f"baseline measured: {baseline:.1f} runs/s", flush=True)
            stop(server)
            server = launch(["serve", "--port", str(port)], queued, folder / "api")
            wait_healthy(base)
            results = {}
            workers: list[subprocess.Popen[bytes]] = []
            for count in (1, 2):
                workers.append(launch(["worker"], queued, folder / f"worker-{count}"))
                time.sleep(8)  # the new worker imports and registers
                measure(base, key, db, 100, {})  # warm-up
                processes = {"api": [server], "workers": workers}
                rate, _, cpu = measure(base, key, db, options.runs, processes)
                results[count] = (rate, paced_waits(base, key, db, 60, PACE), cpu)
                print(f"{count} worker(s) measured: {rate:.1f} runs/s", flush=True)
            for worker in workers:
                stop(worker)
            drains = {
                count: drain(base, key, db, options.drain, count, queued, folder)
                for count in (1, 2)
            }
        finally:
            stop(server)
            db.dispose()
    report(options.runs, options.drain, (baseline, baseline_cpu), results, drains)
    print(f"logs in {folder}")


if __name__ == "__main__":
    main()
