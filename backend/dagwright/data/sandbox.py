"""Python (pandas) on tables, in a child process shut in by the kernel.

Each call gets a fresh scratch folder: the input tables are written there as Parquet, a child
interpreter (`_sandbox_child.py`, run with `python -I`) loads them as DataFrames, runs the code
and writes the value of its variable `result` back (a DataFrame or Series as Parquet, anything
else as JSON). The child starts with a minimal environment (nothing of this process's
variables, so no secrets), in a session of its own so that a wall-clock timeout kills the whole
process group. What the child does to shut itself in is described in `_sandbox_child.py`;
`SandboxResult.isolation` says which of its layers were in effect for a call.

Linux only: the child reads /proc and uses Linux system calls.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from dagwright.errors import SandboxError

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"

_CHILD = Path(__file__).with_name("_sandbox_child.py")
# Words by which a crash without a status file shows it ran out of memory (C++ and glibc).
_MEMORY_HINTS = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory")


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one call may use. CPU time and memory count from after the child's own imports
    (pandas, pyarrow): they are the user's budget. Files written are capped at memory_mb."""

    cpu_s: int = 10
    wall_s: float = 20
    memory_mb: int = 1024
    max_output_rows: int = 10_000
    max_stdout_chars: int = 20_000

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value <= 0:
                raise ValueError(f"sandbox limit {name} must be positive, not {value}")


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """The value of `result` (a table, a JSON value, or None when the code set none), what the
    code printed (cut to max_stdout_chars), and whether the table was cut to max_output_rows.
    `isolation` names the layers in effect: rlimits, network_namespace, landlock_abi_N,
    audit_hook."""

    result: pa.Table | JsonValue
    stdout: str
    duration_s: float
    truncated: bool = False
    isolation: tuple[str, ...] = ()


def run_python(
    code: str, tables: Mapping[str, pa.Table], *, limits: SandboxLimits = SandboxLimits()
) -> SandboxResult:
    """Runs `code` with each table as a DataFrame named by its key (keys that are not Python
    identifiers, or that would hide `pd`, `np` or `tables`, only through the dict `tables`).

    Raises SandboxError: `python_failed` (with the traceback of the user's frames, line numbers
    as in `code`), `python_timeout` (CPU or wall time, the message says which) or
    `python_memory`. Blocks the calling thread until the child ends.
    """
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="dagwright-sandbox-") as folder:
        scratch = Path(folder)
        files = {}
        for index, (name, table) in enumerate(tables.items()):
            files[name] = f"input_{index}.parquet"
            pq.write_table(table, scratch / files[name])
        job = {"code": code, "limits": asdict(limits), "tables": files}
        (scratch / "job.json").write_text(json.dumps(job), encoding="utf-8")
        returncode, cpu_used, wall_killed = _run_child(scratch, limits.wall_s)
        stdout = _read_text(scratch / "stdout.txt", limits.max_stdout_chars)
        status_file = scratch / "status.json"
        status = json.loads(status_file.read_text("utf-8")) if status_file.exists() else None
        if wall_killed:
            raise SandboxError(
                f"the Python code ran past its wall-clock limit of {limits.wall_s:g} s",
                "python_timeout",
                stdout=stdout,
            )
        if returncode == -signal.SIGXCPU or (
            returncode == -signal.SIGKILL and cpu_used >= limits.cpu_s
        ):
            raise SandboxError(
                f"the Python code ran past its CPU time limit of {limits.cpu_s} s",
                "python_timeout",
                stdout=stdout,
            )
        if status is None:
            raise _crash(returncode, _read_text(scratch / "stderr.txt", 2000), stdout, limits)
        if not status["ok"]:
            if status["kind"] == "memory":
                raise SandboxError(
                    f"the Python code ran out of memory (limit {limits.memory_mb} MB): "
                    f"{status['message']}",
                    "python_memory",
                    stdout=stdout,
                )
            raise SandboxError(
                status["message"], "python_failed", traceback=status["traceback"], stdout=stdout
            )
        result: pa.Table | JsonValue = None
        if status["result"] == "table":
            result = pq.read_table(scratch / "result.parquet")
        elif status["result"] == "json":
            result = json.loads((scratch / "result.json").read_text("utf-8"))
        return SandboxResult(
            result=result,
            stdout=stdout,
            duration_s=time.monotonic() - started,
            truncated=bool(status["truncated"]),
            isolation=tuple(status["isolation"]),
        )


def _environment(scratch: Path) -> dict[str, str]:
    """Built from nothing, never copied from os.environ: API keys and database URLs stay out."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": str(scratch),
        "TMPDIR": str(scratch),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        # One thread per native library and few malloc arenas: each thread and arena reserves
        # address space, which the RLIMIT_AS memory limit counts.
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "MALLOC_ARENA_MAX": "2",
        "ARROW_DEFAULT_MEMORY_POOL": "system",
    }


def _run_child(scratch: Path, wall_s: float) -> tuple[int, float, bool]:
    """Runs the child to its end. Returns its exit code (negative: the signal that ended it),
    the CPU seconds it used, and whether the wall clock killed it."""
    with (
        open(scratch / "stdout.txt", "wb") as out,
        open(scratch / "stderr.txt", "wb") as err,
    ):
        process = subprocess.Popen(
            [sys.executable, "-I", "-B", str(_CHILD), str(scratch)],
            cwd=scratch,
            env=_environment(scratch),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,  # its own process group, killed as a whole
        )
    deadline = _Deadline(process.pid, wall_s)
    try:
        # Wait without reaping: while the child is a zombie its pid cannot be reused, so the
        # group can be killed (strays included) with no risk of hitting another process.
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    finally:
        deadline.stop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        _, wait_status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(wait_status)
    return process.returncode, usage.ru_utime + usage.ru_stime, deadline.fired


class _Deadline:
    """Kills the process group when the wall-clock time is up, unless stopped first."""

    def __init__(self, pid: int, seconds: float) -> None:
        self.pid = pid
        self.fired = False
        self._stopped = False
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self.fired = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGKILL)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        self._timer.cancel()


def _read_text(path: Path, max_chars: int) -> str:
    """At most `max_chars` characters of a file the child wrote (native code writing to the
    descriptor directly is not cut by the child, so it is cut here)."""
    if not path.exists():
        return ""
    with open(path, "rb") as handle:
        data = handle.read(max_chars * 4 + 200)  # UTF-8 takes up to 4 bytes per character
    text = data.decode("utf-8", errors="replace")
    if len(text) > max_chars + 100:  # room for the child's own "output cut" line
        text = text[:max_chars] + f"\n... output cut at {max_chars} characters\n"
    return text


def _crash(returncode: int, stderr: str, stdout: str, limits: SandboxLimits) -> SandboxError:
    """The child ended without writing its status: killed by a signal, or the interpreter
    itself failed. A SIGKILL nobody here sent, or a native allocation failure, is memory."""
    if returncode == -signal.SIGKILL or any(hint in stderr for hint in _MEMORY_HINTS):
        return SandboxError(
            f"the Python process ran out of memory (limit {limits.memory_mb} MB)",
            "python_memory",
            stdout=stdout,
        )
    ended = (
        f"signal {signal.Signals(-returncode).name}"
        if returncode < 0
        else f"exit code {returncode}"
    )
    detail = stderr.strip().splitlines()[-1] if stderr.strip() else "no error output"
    return SandboxError(
        f"the Python process ended without a result ({ended}): {detail}",
        "python_failed",
        traceback=stderr or None,
        stdout=stdout,
    )
