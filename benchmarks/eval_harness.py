"""Evaluation harness overhead: examples per second of `EvaluationService.run` (the batch
runner, one recorded run per example, results written as they finish, then scored) over a
no-op app (question -> answer, one node between), against a baseline measured in the same
run: the same app's runs started straight on the run service with the same concurrency and
nothing else (no results written, no scoring). Goal: at least 200 examples/s on 2 cores.

Both use a fresh SQLite database in a temporary folder; figures are medians of --repeat.

Run: .venv/bin/python benchmarks/eval_harness.py [--examples 2000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import statistics
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

GOAL_PER_SECOND = 200.0

NOOP_FLOW: dict[str, Any] = {
    "format": "dagwright.flow",
    "version": 1,
    "name": "noop",
    "nodes": [
        {"id": "question", "block": "text_input", "config": {"name": "question"}},
        {"id": "answer", "block": "output", "config": {"name": "answer"}},
    ],
    "edges": [
        {
            "source": {"node": "question", "port": "output"},
            "target": {"node": "answer", "port": "value"},
        }
    ],
}


@asynccontextmanager
async def services(folder: Path) -> AsyncIterator[Any]:
    from cryptography.fernet import Fernet

    from dagwright.data.connectors.common import SourcePaths
    from dagwright.registry import Registry
    from dagwright.runtime import Executor, ExecutorOptions
    from dagwright.services.apps import AppService
    from dagwright.services.data_sources import DataSourceService
    from dagwright.services.datasets import DatasetService
    from dagwright.services.evaluations import EvaluationService
    from dagwright.services.runs.service import RunService
    from dagwright.services.secret_store import DatabaseSecrets
    from dagwright.store.db import make_engine, migrate

    engine = make_engine(f"sqlite:///{folder / 'bench.db'}")
    migrate(engine)
    secrets = DatabaseSecrets(engine, Fernet.generate_key())
    data = DataSourceService(engine, secrets, paths=lambda: SourcePaths.for_data_dir(folder))
    # The no-op app needs only the input and output blocks (blocks/ is mapped onto
    # dagwright.blocks at install, which mypy does not follow: imported by name).
    io_blocks = importlib.import_module("dagwright.blocks.input")
    apps = AppService(engine, Registry.from_modules([io_blocks]))
    runs = RunService(engine, Executor(ExecutorOptions()), "bench")
    runs.start_writer()
    try:
        datasets = DatasetService(engine, data, folder / "sources" / "eval")
        yield EvaluationService(engine, apps, runs, datasets), apps, runs
    finally:
        await runs.close()
        engine.dispose()


async def measure(examples: int, concurrency: int) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        os.environ["DAGWRIGHT_DATA_DIR"] = str(folder)
        dataset = folder / "noop.jsonl"
        dataset.write_text(
            "".join(
                json.dumps({"id": str(i), "question": str(i), "answer": str(i)}) + "\n"
                for i in range(examples)
            )
        )
        async with services(folder) as (evaluations, apps, runs):
            evaluations.datasets.import_file("noop", "generic", dataset)
            apps.create_app("noop", "noop")
            version = apps.create_version("noop", NOOP_FLOW)
            apps.publish("noop", version.id)
            plan = apps.compiled(version)

            # Baseline: the runs alone, as many at once.
            gate = asyncio.Semaphore(concurrency)

            async def one(i: int) -> None:
                async with gate:
                    live = await runs.start(
                        plan, {"question": str(i)}, app_id=version.app_id, version_id=version.id
                    )
                    await live.wait()

            started = time.perf_counter()
            await asyncio.gather(*(one(i) for i in range(examples)))
            baseline = examples / (time.perf_counter() - started)

            row = evaluations.create("noop", None, "noop")
            started = time.perf_counter()
            done = await evaluations.run(row.id, concurrency=concurrency)
            harness = examples / (time.perf_counter() - started)
            assert done.status == "completed"
            assert done.aggregate is not None
            assert done.aggregate["accuracy"] == 1.0
    return harness, baseline


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = [asyncio.run(measure(args.examples, args.concurrency)) for _ in range(args.repeat)]
    harness = statistics.median(r[0] for r in results)
    baseline = statistics.median(r[1] for r in results)
    verdict = "OK" if harness >= GOAL_PER_SECOND else "BELOW GOAL"
    print(
        f"evaluation harness over a no-op app: {args.examples} examples, concurrency "
        f"{args.concurrency}, cores {os.cpu_count()}"
    )
    print(f"  harness : {harness:8.1f} examples/s (goal >= {GOAL_PER_SECOND:.0f}/s) {verdict}")
    print(f"  baseline: {baseline:8.1f} runs/s (the same runs, no harness)")
    print(
        f"  ratio harness/baseline: {harness / baseline:.2f} "
        f"(overhead per example {1e3 / harness - 1e3 / baseline:+.2f} ms)"
    )


if __name__ == "__main__":
    main()
