"""Federated query benchmark: one SQL query joins a 1,000,000-row PostgreSQL table
(daily_billing) with a MariaDB table (clusters) and a Parquet file (operations_events), with a
filter and an aggregate, on dagwright's engine (DuckDB fed Arrow by the connectors, with
projection and filters pushed down), against the plain way: load each source whole into
pandas and join there. Target: at least 3x faster, with memory bounded.

Each method runs in a fresh subprocess (so its peak RSS is its own), several times; the
figures are medians. Both must give the same answer.

Run: .venv/bin/python benchmarks/data_federation.py [--rows 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
MYSQL = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
SCHEMA = "dw_bench_fed"
DATABASE = "dw_bench_fed"
TARGET_RATIO = 3.0

QUERY = f"""
SELECT c.cloud_provider, count(*) AS lines, sum(b.cost_usd) AS cost
FROM pg.{SCHEMA}.daily_billing b
JOIN my.{DATABASE}.clusters c ON c.cluster_id = b.cluster_id
JOIN (SELECT DISTINCT cluster_id FROM files.main.operations_events
      WHERE event_type = 'scale_out') e ON e.cluster_id = b.cluster_id
WHERE b.service = 'compute' AND b.billing_date >= DATE '2024-01-01'
GROUP BY c.cloud_provider
ORDER BY c.cloud_provider
"""


def load(rows: int, folder: Path) -> None:
    from dagwright.data.demo import generate_billing, load_billing

    started = time.perf_counter()
    tables = generate_billing(rows)
    load_billing(tables, PG_URL, SCHEMA, MYSQL, DATABASE, folder)
    print(f"loaded {rows:,} billing rows into PostgreSQL, MariaDB and Parquet in "
          f"{time.perf_counter() - started:.1f} s")  # fmt: skip


def run_engine(folder: Path) -> list[tuple[str, int, float]]:
    from dagwright.data.catalog import Catalog
    from dagwright.data.connectors.common import SourcePaths
    from dagwright.data.engine import QueryEngine

    catalog = Catalog.from_config(
        {
            "pg": {"kind": "postgres", "url": PG_URL, "schemas": [SCHEMA]},
            "my": {"kind": "mysql", "url": f"mysql://root@127.0.0.1:3306/{DATABASE}"},
            "files": {"kind": "files", "path": str(folder)},
        },
        paths=SourcePaths((folder.resolve(),)),
    )
    with catalog:
        engine = QueryEngine(catalog)
        result = engine.query(QUERY, timeout_s=600)
        for read in result.reads:
            print(
                f"    {read.source}.{read.table}: columns {', '.join(read.columns)}; "
                f"pushed {' and '.join(read.filters) or 'nothing'}; {read.rows:,} rows",
                file=sys.stderr,
            )
        return [(r["cloud_provider"], r["lines"], round(r["cost"], 2)) for r in result.records()]


def run_pandas(folder: Path) -> list[tuple[str, int, float]]:
    import pandas as pd
    from sqlalchemy import create_engine

    pg = create_engine(PG_URL.replace("postgresql://", "postgresql+psycopg://"))
    my = create_engine(f"mysql+pymysql://root@127.0.0.1:3306/{DATABASE}")
    billing = pd.read_sql_query(f"SELECT * FROM {SCHEMA}.daily_billing", pg)
    clusters = pd.read_sql_query("SELECT * FROM clusters", my)
    events = pd.read_parquet(folder / "operations_events.parquet")
    billing = billing[
        (billing["service"] == "compute")
        & (billing["billing_date"] >= pd.Timestamp("2024-01-01").date())
    ]
    scaled = events.loc[events["event_type"] == "scale_out", ["cluster_id"]].drop_duplicates()
    joined = billing.merge(clusters, on="cluster_id").merge(scaled, on="cluster_id")
    joined["cost_usd"] = joined["cost_usd"].astype(float)
    grouped = (
        joined.groupby("cloud_provider").agg(lines=("cost_usd", "size"), cost=("cost_usd", "sum"))
    ).sort_index()
    return [(str(k), int(row.lines), round(float(row.cost), 2)) for k, row in grouped.iterrows()]


def child(method: str, folder: Path) -> None:
    started = time.perf_counter()
    answer = run_engine(folder) if method == "engine" else run_pandas(folder)
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "peak_mb": peak_mb, "answer": answer}))


def measure(method: str, folder: Path, repeat: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeat):
        done = subprocess.run(
            [sys.executable, __file__, "--child", method, "--folder", str(folder)],
            capture_output=True,
            text=True,
            check=True,
            # The Parquet folder is a temporary one: a source root for the files source.
            env={**os.environ, "DAGWRIGHT_SOURCE_ROOTS": str(folder.resolve())},
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        if method == "engine" and len(runs) == 1:
            print(done.stderr.rstrip())
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "peak_mb": max(r["peak_mb"] for r in runs),
        "answer": runs[0]["answer"],
    }


def drop() -> None:
    import psycopg
    import pymysql

    with psycopg.connect(PG_URL, autocommit=True) as connection:
        connection.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    server = pymysql.connect(host="127.0.0.1", port=3306, user="root", password="")
    try:
        with server.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {DATABASE}")
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", choices=["engine", "pandas"])
    parser.add_argument("--folder", type=Path)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.folder)
        return
    with tempfile.TemporaryDirectory(prefix="dw-bench-fed-") as name:
        folder = Path(name)
        try:
            load(args.rows, folder)
            print("dagwright engine (pushdown, streamed Arrow):")
            engine = measure("engine", folder, args.repeat)
            pandas = measure("pandas", folder, args.repeat)
        finally:
            drop()
    if engine["answer"] != pandas["answer"]:
        raise SystemExit(f"answers differ:\n engine {engine['answer']}\n pandas {pandas['answer']}")
    ratio = pandas["seconds"] / engine["seconds"]
    print(f"answer (both): {engine['answer']}")
    print(f"engine: {engine['seconds']:.2f} s, peak RSS {engine['peak_mb']:.0f} MB")
    print(f"pandas: {pandas['seconds']:.2f} s, peak RSS {pandas['peak_mb']:.0f} MB")
    verdict = "met" if ratio >= TARGET_RATIO else "MISSED"
    print(f"speed-up x{ratio:.1f} (target >= x{TARGET_RATIO:.0f}: {verdict}); "
          f"memory x{pandas['peak_mb'] / engine['peak_mb']:.1f} less")  # fmt: skip


if __name__ == "__main__":
    main()
