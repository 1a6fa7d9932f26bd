"""SQL bombs against a real server (issue 13, finding 6).

Each case sends hostile SQL to `POST /api/v1/query` of a `dagwright serve` process, as an
editor (or anyone with the admin API, or a model whose SQL a flow runs) would, while the
health probe (support.probe) checks that nobody else waited 1 s meanwhile. The server must
answer with a typed 4xx quickly: never a 500, never minutes of CPU, never gigabytes.

Before the fix a 1.6 MB query took 20 s of CPU before any limit applied, 500 nested
parentheses raised RecursionError (HTTP 500), ``repeat('ab', 1000000000)`` ran 27 s past a
1 s limit and took 4 GB, and the process reached 5.7 GB with a 2 GB memory limit.

The server here runs with DuckDB's memory limit at 256 MB (DAGWRIGHT_QUERY_MEMORY), so the
memory bombs are refused at a few hundred megabytes, and with the process's own ceiling
(DAGWRIGHT_PROCESS_MEMORY, RLIMIT_DATA, which counts address space: ~1.5 GB at rest) at
4 GiB: the one bound on a single DuckDB call that builds lists of lists, which neither
DuckDB's limit nor the watchdog can stop (docs/security/data.md). The server's resident
memory is read from /proc and reported (pytest -s shows it).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dagwright.data.safety import MAX_SQL_BYTES
from support.probe import health_probe
from support.server import Api, ServerProcess, error_of

QUERY_MEMORY_MB = 256
PROCESS_MEMORY_MB = 4096
# DuckDB's limit, then the watchdog's (1.25 x), then what Python, Arrow and the allocator keep.
MEMORY_BOUND_MB = QUERY_MEMORY_MB * 5 // 4 + 300
QUICK_S = 5.0  # a refusal, generous for a loaded CI machine (the probe's 1 s is the strict check)


@pytest.fixture(scope="module", autouse=True)
def small_query_memory() -> Iterator[None]:
    """Set before the module's server starts (autouse fixtures come first)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DAGWRIGHT_QUERY_MEMORY", f"{QUERY_MEMORY_MB}MB")
        patch.setenv("DAGWRIGHT_PROCESS_MEMORY", f"{PROCESS_MEMORY_MB}MiB")
        yield


def query(api: Api, sql: str, **options: Any) -> httpx.Response:
    return api.http.post("/api/v1/query", json={"sql": sql, **options}, timeout=60)


def memory_mb(server: ServerProcess) -> tuple[int, int]:
    """The server's resident memory now and its peak so far (VmRSS, VmHWM), in MiB."""
    assert server.process is not None
    status = Path(f"/proc/{server.process.pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def reset_peak(server: ServerProcess) -> None:
    """Starts the server's VmHWM afresh (5 to clear_refs: the process is ours)."""
    assert server.process is not None
    Path(f"/proc/{server.process.pid}/clear_refs").write_text("5")


def settle(api: Api) -> None:
    """Waits until queries that ran past their limit in an earlier case have ended (the
    engine answers 503 query_busy while too many of them run)."""
    deadline = time.monotonic() + 60
    while (answer := query(api, "SELECT 1 AS one")).status_code == 503:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.2)
    assert answer.status_code == 200, answer.text


def attack(
    server: ServerProcess, api: Api, sql: str, **options: Any
) -> tuple[httpx.Response, float]:
    """The answer to one hostile query and how long it took, under the health probe."""
    settle(api)
    with health_probe(server.base_url):
        started = time.monotonic()
        response = query(api, sql, **options)
        elapsed = time.monotonic() - started
    assert response.status_code != 500, response.text
    return response, elapsed


def test_the_server_answers_queries(api: Api) -> None:
    answer = query(api, "SELECT e.Name FROM hr.main.Employee e ORDER BY e.ID")
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [{"Name": "Lucy"}, {"Name": "Tom"}]


@pytest.mark.parametrize("size", [MAX_SQL_BYTES + 1, 1_000_000, 1_900_000])
def test_a_huge_query_is_refused_before_it_is_parsed(
    server_process: ServerProcess, api: Api, size: int
) -> None:
    sql = "SELECT 1 + " + "+".join(["1"] * ((size - 11) // 2 + 1))
    response, elapsed = attack(server_process, api, sql)
    error = error_of(response, 400)
    assert error["code"] == "sql_too_large"
    assert f"{MAX_SQL_BYTES:,}" in error["message"]
    assert elapsed < QUICK_S


def test_a_body_over_the_server_limit_is_413(server_process: ServerProcess, api: Api) -> None:
    response, _ = attack(server_process, api, "SELECT '" + "x" * 3_000_000 + "'")
    assert error_of(response, 413)["code"] == "payload_too_large"


DEEP = {
    "parentheses": "SELECT " + "(" * 5000 + "1" + ")" * 5000,
    "subqueries": "SELECT * FROM " + "(SELECT * FROM " * 5000 + "hr.main.Employee" + ") x" * 5000,
    "scalar subqueries": "SELECT " + "(SELECT " * 5000 + "1" + ")" * 5000,
    "function calls": "SELECT " + "abs(" * 5000 + "1" + ")" * 5000,
    "CASE": "SELECT " + "CASE WHEN true THEN " * 5000 + "1" + " END" * 5000,
    "lists": "SELECT " + "[" * 5000 + "1" + "]" * 5000,
    "just over the limit": "SELECT " + "(" * 33 + "1" + ")" * 33,
    # No brackets: recursive in the parser all the same (RecursionError before the fix).
    "NOT chain": "SELECT " + "NOT " * 5000 + "true",
    "minus chain": "SELECT " + "- " * 5000 + "1",
    # A chain of additions: deep for DuckDB's optimizer (900 of them took it 15 s).
    "addition chain": "SELECT " + "+".join(["ID"] * 900) + " FROM hr.main.Employee",
}


@pytest.mark.parametrize("sql", DEEP.values(), ids=DEEP.keys())
def test_deep_nesting_is_a_typed_400_not_a_500(
    server_process: ServerProcess, api: Api, sql: str
) -> None:
    response, elapsed = attack(server_process, api, sql)
    error = error_of(response, 400)
    assert error["code"] in ("sql_too_deep", "sql_too_large"), error
    assert "RecursionError" not in error["message"]
    assert elapsed < QUICK_S


EXPENSIVE_TO_PLAN = {
    "UNION arms": " UNION ALL ".join(["SELECT 1"] * 200),
    "tables": "SELECT 1 FROM " + ", ".join(f"hr.main.Employee e{i}" for i in range(100)),
    "select items": "SELECT " + ",".join(["ID"] * 3000) + " FROM hr.main.Employee",
    "nested lambdas": "SELECT " + "list_transform([1], x -> " * 20 + "x" + ")" * 20,
    "CTEs doubling": "WITH c0 AS (SELECT ID AS x FROM hr.main.Employee), "
    + ", ".join(f"c{i} AS (SELECT a.x FROM c{i - 1} a, c{i - 1} b)" for i in range(1, 24))
    + " SELECT count(*) FROM c23",
}


@pytest.mark.parametrize("sql", EXPENSIVE_TO_PLAN.values(), ids=EXPENSIVE_TO_PLAN.keys())
def test_sql_that_is_expensive_to_plan_is_refused(
    server_process: ServerProcess, api: Api, sql: str
) -> None:
    response, elapsed = attack(server_process, api, sql)
    error = error_of(response, 400)
    assert error["code"] in ("sql_too_large", "sql_refused"), error
    assert elapsed < QUICK_S


LONG_RUNNING = {
    "cross join with string functions": (
        "SELECT count(*) FROM range(100000) a(x), range(100000) b(y)"
        " WHERE md5(x::VARCHAR || y::VARCHAR) LIKE '%abcdef%'"
    ),
    "huge series with string functions": (
        "SELECT count(*) FROM generate_series(1, 10000000000) t(x)"
        " WHERE upper(md5(x::VARCHAR)) = reverse(md5(x::VARCHAR))"
    ),
    "recursive CTE without end": (
        "WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r) SELECT count(*) FROM r"
    ),
    # One call DuckDB does not interrupt (edit distance of two 32,000-character strings, ~2 s
    # of CPU): answered at the limit all the same, the call finishing in the background.
    "one uninterruptible call": (
        "WITH s AS (SELECT string_agg(md5(x::VARCHAR), '') AS s FROM range(1000) t(x))"
        " SELECT levenshtein(s, s) FROM s"
    ),
}


@pytest.mark.parametrize("sql", LONG_RUNNING.values(), ids=LONG_RUNNING.keys())
def test_a_long_running_query_stops_at_its_time_limit(
    server_process: ServerProcess, api: Api, sql: str
) -> None:
    response, elapsed = attack(server_process, api, sql, timeout_s=1)
    error = error_of(response, 408)
    assert error["code"] == "query_timeout"
    assert elapsed < 2.0, f"answered after {elapsed:.2f} s with a 1 s limit"
    settle(api)  # whatever ran on in the background ends: the engine answers again


MEMORY_BOMBS = {
    "list of a billion numbers": "SELECT length(list(x)) FROM range(1000000000) t(x)",
    "string_agg of 200 million hashes": (
        "SELECT length(string_agg(md5(x::VARCHAR), ',')) FROM range(200000000) t(x)"
    ),
    "hash join of 100 million rows": (
        "SELECT count(*) FROM range(100000000) a(x) JOIN range(100000000) b(y) ON x = y"
    ),
    "distinct of 300 million hashes": (
        "SELECT count(DISTINCT md5(x::VARCHAR)) FROM range(300000000) t(x)"
    ),
    "a string doubled 31 times": (
        "WITH RECURSIVE r(s, n) AS (SELECT 'ab', 0 UNION ALL SELECT s || s, n + 1 FROM r"
        " WHERE n < 31) SELECT max(length(s)) FROM r"
    ),
    "wide rows, many of them": "SELECT lpad(x::VARCHAR, 10000, '.') AS s FROM range(100000) t(x)",
}
AMPLIFIERS = {
    "repeat": "SELECT length(repeat('ab', 1000000000))",
    "lpad": "SELECT length(lpad('x', 2000000000, 'y'))",
    "printf width": "SELECT length(printf('%2000000000d', 1))",
    "range as a list": "SELECT list_sort(range(300000000))[1]",
}


@pytest.mark.parametrize("sql", MEMORY_BOMBS.values(), ids=MEMORY_BOMBS.keys())
def test_a_memory_bomb_is_refused_and_the_server_stays_small(
    server_process: ServerProcess, api: Api, sql: str
) -> None:
    settle(api)
    reset_peak(server_process)
    before, _ = memory_mb(server_process)
    response, elapsed = attack(server_process, api, sql, timeout_s=60, max_rows=100_000)
    after, peak = memory_mb(server_process)
    print(f"\n  rss before {before} MiB, peak {peak} MiB, after {after} MiB; {elapsed:.1f} s")
    error = error_of(response, 400)
    assert error["code"] in ("query_memory", "query_result_too_large"), error
    assert peak - before < MEMORY_BOUND_MB, f"the server grew to {peak} MiB from {before}"


def test_one_call_that_builds_lists_of_lists_is_stopped_by_the_process_ceiling(
    server_process: ServerProcess, api: Api
) -> None:
    """One DuckDB call, outside its memory limit and deaf to interruption: 16 GB if nothing
    stops it (9.8 GB measured before the fix). The watchdog answers the caller; the call
    itself fails at the process's ceiling, and the server is fine afterwards."""
    sql = (
        "WITH l AS (SELECT list(x) AS l FROM range(1000000) t(x))"
        " SELECT len(flatten(list_transform(range(1, 2000), i -> l))) FROM l"
    )
    settle(api)
    reset_peak(server_process)
    before, _ = memory_mb(server_process)
    response, elapsed = attack(server_process, api, sql, timeout_s=60)
    settle(api)  # the call has ended: the engine answers again
    after, peak = memory_mb(server_process)
    print(f"\n  rss before {before} MiB, peak {peak} MiB, after {after} MiB; {elapsed:.1f} s")
    assert error_of(response, 400)["code"] == "query_memory"
    assert peak < PROCESS_MEMORY_MB, f"the server reached {peak} MiB"
    answer = query(api, "SELECT count(*) AS n FROM range(1000000)")  # and works as before
    assert answer.json()["rows"] == [{"n": 1_000_000}], answer.text


@pytest.mark.parametrize("sql", AMPLIFIERS.values(), ids=AMPLIFIERS.keys())
def test_a_value_amplifier_is_refused_before_it_runs(
    server_process: ServerProcess, api: Api, sql: str
) -> None:
    response, elapsed = attack(server_process, api, sql)
    error = error_of(response, 400)
    assert error["code"] == "sql_refused"
    assert "builds values larger than its input" in error["message"]
    assert elapsed < QUICK_S


def test_the_server_is_still_fine(api: Api) -> None:
    answer = query(api, "SELECT count(*) AS n FROM hr.main.Employee")
    assert answer.status_code == 200, answer.text
    assert answer.json()["rows"] == [{"n": 2}]
