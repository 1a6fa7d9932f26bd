"""Python (pandas) on tables, in a child process shut in by the kernel.

Each call gets a fresh host folder with two parts: `job/` (the code and the input tables as
Parquet, read-only to the child) and `out/` (files the parent opened and hands over as
descriptors: status, result, stdout, stderr). The child interpreter (`_sandbox_child.py`, run
with `python -I`) loads the tables as DataFrames, runs the code and writes the value of its
variable `result` back (a DataFrame or Series as Parquet, anything else as JSON).

The child runs under bubblewrap (`dagwright.data.isolation`): its own user, mount, PID,
network, IPC, UTS and cgroup namespaces, uid 65534, nothing of the host's file system but the
Python runtime (read-only), and a size-limited tmpfs as its only writable place. It is the
init of its PID namespace, so when it ends the kernel kills every process it made, before
this call returns. Inside, the child adds rlimits, a seccomp filter (no new processes),
Landlock and an audit hook (see `_sandbox_child.py`). `SandboxResult.isolation` names the
layers that were in force.

Without bubblewrap nothing runs (`SandboxError` code `sandbox_unavailable`), unless the
operator opted in to the unisolated child (DAGWRIGHT_SANDBOX_ALLOW_UNISOLATED=1).

Linux only: the child reads /proc and uses Linux system calls.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.parquet as pq

from dagwright.data import sandbox_budget, sandbox_cgroup
from dagwright.data.isolation import (
    BWRAP_LAYERS,
    INSIDE_CHILD,
    INSIDE_JOB,
    INSIDE_SCRATCH,
    SandboxSettings,
    bwrap_argv,
    parent_of,
    probe,
    read_child_pid,
    unavailable_error,
)
from dagwright.data.sandbox_scratch import scratch_folder
from dagwright.errors import SandboxError

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"

_CHILD = Path(__file__).with_name("_sandbox_child.py")
# Words by which a crash without a status file shows it ran out of memory (C++ and glibc).
_MEMORY_HINTS = ("MemoryError", "bad_alloc", "Cannot allocate memory", "out of memory")
# The child's seccomp filter refuses new processes. Only tests turn it off, to show that the
# PID namespace alone ends every process the code made.
_FORBID_NEW_PROCESSES = True
_STATUS_MAX_BYTES = 4 * 1024 * 1024  # a status is a message and a traceback
_SETUP_TIMEOUT_S = 30.0  # bwrap reports the sandbox's pid within milliseconds


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """What one call may use. CPU time and memory count from after the child's own imports
    (pandas, pyarrow): they are the user's budget. Each file written is capped at memory_mb;
    the scratch folder (a tmpfs, so memory too) at scratch_mb and scratch_files files. Threads
    and processes together are capped at max_tasks where the kernel enforces it (not for a
    server running as root); new processes are refused anyway."""

    cpu_s: int = 10
    wall_s: float = 20
    memory_mb: int = 1024
    max_output_rows: int = 10_000
    max_stdout_chars: int = 20_000
    scratch_mb: int = 256
    scratch_files: int = 10_000
    max_tasks: int = 64

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value <= 0:
                raise ValueError(f"sandbox limit {name} must be positive, not {value}")


@dataclass(frozen=True, slots=True)
class SandboxResult:
    """The value of `result` (a table, a JSON value, or None when the code set none), what the
    code printed (cut to max_stdout_chars), and whether the table was cut to max_output_rows.
    `isolation` names the layers in effect, outermost first: host_budget (the host-wide
    share, dagwright.data.sandbox_budget), bubblewrap and its namespaces (user_namespace,
    mount_namespace, pid_namespace, network_namespace, ipc_namespace, uts_namespace,
    cgroup_namespace), scratch_quota (bytes), nproc_limit, cgroup_vN_memory and
    cgroup_vN_pids (the call's own cgroup, where the host offers one), then the child's own:
    scratch_file_quota, rlimits, seccomp, landlock_abi_N, audit_hook. Without bubblewrap
    (operator opt-in) host_budget is followed by rlimits."""

    result: pa.Table | JsonValue
    stdout: str
    duration_s: float
    truncated: bool = False
    isolation: tuple[str, ...] = ()


def run_python(
    code: str,
    tables: Mapping[str, pa.Table],
    *,
    limits: SandboxLimits = SandboxLimits(),
    settings: SandboxSettings,
) -> SandboxResult:
    """Runs `code` with each table as a DataFrame named by its key (keys that are not Python
    identifiers, or that would hide `pd`, `np` or `tables`, only through the dict `tables`).

    Raises SandboxError: `python_failed` (with the traceback of the user's frames, line numbers
    as in `code`), `python_timeout` (CPU or wall time, the message says which),
    `python_memory`, or `sandbox_unavailable` (no bubblewrap, and no opt-in to run without).
    Blocks the calling thread until the child and every process it made have ended.
    """
    found = probe(settings)
    if not found.available and not settings.allow_unisolated:
        raise unavailable_error(found)
    with sandbox_budget.share(settings.budget, limits.memory_mb, limits.scratch_mb) as charge:
        cgroup = None
        if found.available and settings.cgroup:
            cgroup = sandbox_cgroup.new_call(charge * 1024 * 1024, limits.max_tasks)
        return _run(code, tables, limits, found.available, found.bwrap, cgroup)


def _run(  # noqa: PLR0912, C901
    code: str,
    tables: Mapping[str, pa.Table],
    limits: SandboxLimits,
    isolated: bool,
    bwrap: str,
    cgroup: sandbox_cgroup.CallCgroup | None,
) -> SandboxResult:
    """One call, its share of the host's budget held (see run_python)."""
    started = time.monotonic()
    with scratch_folder() as base:
        job_dir, out = base / "job", base / "out"
        job_dir.mkdir()
        out.mkdir()
        files = {}
        for index, (name, table) in enumerate(tables.items()):
            files[name] = f"input_{index}.parquet"
            pq.write_table(table, job_dir / files[name])
        if isolated:
            scratch_path = INSIDE_SCRATCH
        else:
            (base / "scratch").mkdir()
            scratch_path = str(base / "scratch")
        nproc = isolated and os.geteuid() != 0  # the kernel exempts host root from it
        with _output(out / "status.json") as status_fd, _output(out / "result") as result_fd:
            job = {
                "code": code,
                "limits": asdict(limits),
                "tables": files,
                "fds": {"status": status_fd, "result": result_fd},
                "bwrap": isolated,
                "nproc": nproc,
                "forbid_new_processes": _FORBID_NEW_PROCESSES,
            }
            (job_dir / "job.json").write_text(json.dumps(job), encoding="utf-8")
            if isolated:
                returncode, cpu_used, wall_killed = _run_in_bwrap(
                    bwrap, job_dir, out, scratch_path, limits, (status_fd, result_fd), cgroup
                )
            else:
                returncode, cpu_used, wall_killed = _run_unisolated(
                    job_dir, out, scratch_path, limits, (status_fd, result_fd)
                )
        stdout = _read_text(out / "stdout.txt", limits.max_stdout_chars)
        stderr = _read_text(out / "stderr.txt", 2000)
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
        status = _read_status(out / "status.json")
        if cgroup is not None and cgroup.oom_killed and (status is None or not status["ok"]):
            raise SandboxError(
                f"the Python code ran out of memory (limit {limits.memory_mb} MB; the call's "
                f"cgroup allows {cgroup.memory_bytes // (1024 * 1024)} MB with the "
                "interpreter and scratch folder)",
                "python_memory",
                stdout=stdout,
            )
        if status is None:
            if isolated and stderr.startswith("bwrap:"):
                raise SandboxError(
                    f"the sandbox could not be set up: {stderr.strip()}", "sandbox_unavailable"
                )
            raise _crash(returncode, stderr, stdout, limits)
        if not status["ok"]:
            if status.get("kind") == "sandbox":
                raise SandboxError(str(status.get("message")), "sandbox_unavailable")
            if status.get("kind") == "memory":
                raise SandboxError(
                    f"the Python code ran out of memory (limit {limits.memory_mb} MB): "
                    f"{status.get('message')}",
                    "python_memory",
                    stdout=stdout,
                )
            raise SandboxError(
                str(status.get("message")),
                "python_failed",
                traceback=status.get("traceback"),
                stdout=stdout,
            )
        result = _read_result(out / "result", status.get("result"), stdout)
        layers = ["host_budget"]
        if isolated:
            layers += [*BWRAP_LAYERS, *(["nproc_limit"] if nproc else [])]
            layers += cgroup.host.layers() if cgroup is not None else []
        return SandboxResult(
            result=result,
            stdout=stdout,
            duration_s=time.monotonic() - started,
            truncated=bool(status.get("truncated")),
            isolation=(*layers, *(str(layer) for layer in status.get("isolation", ()))),
        )


@contextlib.contextmanager
def _output(path: Path) -> Iterator[int]:
    """A file the child writes through a descriptor: it never sees the host folder, and
    RLIMIT_FSIZE caps what it writes there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        yield fd
    finally:
        os.close(fd)


def _environment(scratch: str) -> dict[str, str]:
    """Built from nothing, never copied from os.environ: API keys and database URLs stay out."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": scratch,
        "TMPDIR": scratch,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        # One thread per native library and few malloc arenas: each thread and arena reserves
        # address space, which the RLIMIT_AS memory limit counts (and threads count as tasks).
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "ARROW_IO_THREADS": "2",
        "MALLOC_ARENA_MAX": "2",
        "ARROW_DEFAULT_MEMORY_POOL": "system",
    }


def _run_in_bwrap(
    bwrap: str,
    job_dir: Path,
    out: Path,
    scratch: str,
    limits: SandboxLimits,
    outputs: tuple[int, ...],
    cgroup: sandbox_cgroup.CallCgroup | None,
) -> tuple[int, float, bool]:
    """Runs the child under bubblewrap to its end and makes sure nothing of the sandbox is
    left. Returns the child's exit code (negative: the signal that ended it), the CPU seconds
    it and its processes used, and whether the wall clock killed it. With a cgroup, the
    child is moved into it before it runs anything, and the cgroup is removed at the end."""
    command = [sys.executable, "-I", "-B", INSIDE_CHILD, INSIDE_JOB, scratch]
    info_r, info_w = os.pipe2(os.O_CLOEXEC)
    block_r, block_w = os.pipe2(os.O_CLOEXEC)
    try:
        argv = bwrap_argv(
            bwrap,
            job=job_dir,
            scratch_bytes=limits.scratch_mb * 1024 * 1024,
            fds={"info": info_w, "block": block_r},
            command=command,
            environment=_environment(scratch),
        )
        with (
            open(out / "stdout.txt", "wb") as stdout,
            open(out / "stderr.txt", "wb") as stderr,
        ):
            process = subprocess.Popen(
                argv,
                cwd="/",
                env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"},
                stdin=subprocess.DEVNULL,
                stdout=stdout,
                stderr=stderr,
                pass_fds=(info_w, block_r, *outputs),
                start_new_session=True,
            )
    except BaseException:
        for fd in (info_r, info_w, block_r, block_w):
            os.close(fd)
        raise
    os.close(info_w)
    os.close(block_r)
    sandbox = _Sandbox(process.pid)
    deadline: _Deadline | None = None
    created = False
    try:
        # The sandbox waits on block_r before it runs the command: its pid is pinned first, so
        # that a kill can never hit another process that was given the same pid.
        child = read_child_pid(_read_until_eof(info_r, _SETUP_TIMEOUT_S))
        sandbox.pin(child)
        if cgroup is not None:
            # In before the first line of the user's code: every thread and process it makes
            # is born inside, under memory.max and pids.max.
            if child is None or sandbox.pidfd is None:
                raise SandboxError(
                    "the sandbox did not start: no code is run", "sandbox_unavailable"
                )
            created = True  # a half-made cgroup is removed too
            try:
                cgroup.create()
                cgroup.add(child)
            except OSError as exc:
                raise SandboxError(
                    f"the sandbox's cgroup could not be set up ({exc}): no code is run",
                    "sandbox_unavailable",
                ) from None
        deadline = _Deadline(sandbox.kill, limits.wall_s)
        with contextlib.suppress(BrokenPipeError):
            os.write(block_w, b"x")
        os.close(block_w)
        block_w = -1
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    finally:
        if deadline is not None:
            deadline.stop()
        if block_w != -1:
            os.close(block_w)
        os.close(info_r)
        sandbox.kill()  # nothing left to kill when the child ended by itself
        _, wait_status, usage = os.wait4(process.pid, 0)
        sandbox.wait_gone()
        if cgroup is not None and created:
            cgroup.finish()
    returncode = os.waitstatus_to_exitcode(wait_status)
    if returncode > 128 and returncode - 128 in signal.valid_signals():
        returncode = -(returncode - 128)  # bwrap reports a signal as 128 + its number
    return returncode, usage.ru_utime + usage.ru_stime, bool(deadline and deadline.fired)


def _read_until_eof(fd: int, timeout: float) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data


class _Sandbox:
    """The sandbox's init process (the child, pid 1 of its namespace) as a pidfd."""

    def __init__(self, bwrap_pid: int) -> None:
        self.bwrap_pid = bwrap_pid
        self.pidfd: int | None = None
        self._lock = threading.Lock()

    def pin(self, pid: int | None) -> None:
        if pid is None:
            return
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return  # already gone
        # Still bwrap's child: the pidfd is the sandbox, not a process that reused its pid.
        if parent_of(pid) != self.bwrap_pid:
            os.close(fd)
            return
        with self._lock:
            self.pidfd = fd

    def kill(self) -> None:
        """SIGKILL to the namespace's init, after which the kernel kills the rest. Before its
        pid is known: to bwrap (not yet reaped, so its pid is still its own), whose death
        kills the sandbox (--die-with-parent)."""
        with self._lock:
            if self.pidfd is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.bwrap_pid, signal.SIGKILL)

    def wait_gone(self, timeout: float = 10.0) -> None:
        """Waits for the init's exit, which the kernel reports only once every other process
        of its namespace has been killed and reaped."""
        with self._lock:
            fd, self.pidfd = self.pidfd, None
        if fd is None:
            return
        try:
            poller = select.poll()
            poller.register(fd, select.POLLIN)
            if not poller.poll(timeout * 1000):
                raise SandboxError(
                    f"the sandbox's processes did not end within {timeout:g} s of being killed",
                    "python_failed",
                )
        finally:
            os.close(fd)


def _run_unisolated(
    job_dir: Path,
    out: Path,
    scratch: str,
    limits: SandboxLimits,
    outputs: tuple[int, ...],
) -> tuple[int, float, bool]:
    """The operator's opt-in without bubblewrap: the child in a session of its own, killed as
    a process group (a process that leaves the group escapes that, not seccomp's refusal)."""
    with (
        open(out / "stdout.txt", "wb") as stdout,
        open(out / "stderr.txt", "wb") as stderr,
    ):
        process = subprocess.Popen(
            [sys.executable, "-I", "-B", str(_CHILD), str(job_dir), scratch],
            cwd=scratch,
            env=_environment(scratch),
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            pass_fds=outputs,
            start_new_session=True,  # its own process group, killed as a whole
        )

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)

    deadline = _Deadline(kill, limits.wall_s)
    try:
        # Wait without reaping: while the child is a zombie its pid cannot be reused, so the
        # group can be killed (strays included) with no risk of hitting another process.
        os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOWAIT)
    finally:
        deadline.stop()
        kill()
        _, wait_status, usage = os.wait4(process.pid, 0)
    returncode = os.waitstatus_to_exitcode(wait_status)
    return returncode, usage.ru_utime + usage.ru_stime, deadline.fired


class _Deadline:
    """Calls `kill` when the wall-clock time is up, unless stopped first."""

    def __init__(self, kill: Callable[[], None], seconds: float) -> None:
        self.kill = kill
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
            self.kill()

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


def _read_status(path: Path) -> dict[str, Any] | None:
    """The child's status, or None when it wrote none (or garbage: the user's code can write
    to the descriptor too, which only spoils its own answer)."""
    with open(path, "rb") as handle:
        data = handle.read(_STATUS_MAX_BYTES + 1)
    if not data or len(data) > _STATUS_MAX_BYTES:
        return None
    try:
        status = json.loads(data)
    except ValueError:
        return None
    return status if isinstance(status, dict) and isinstance(status.get("ok"), bool) else None


def _read_result(path: Path, kind: Any, stdout: str) -> pa.Table | JsonValue:
    try:
        if kind == "table":
            return pq.read_table(path)
        if kind == "json":
            value: JsonValue = json.loads(path.read_bytes())
            return value
    except (ValueError, OSError, pa.ArrowException) as exc:
        raise SandboxError(
            f"the result of the Python code could not be read: {exc}",
            "python_failed",
            stdout=stdout,
        ) from None
    return None


def _crash(returncode: int, stderr: str, stdout: str, limits: SandboxLimits) -> SandboxError:
    """The child ended without writing its status: killed by a signal, or the interpreter
    itself failed. A SIGKILL nobody here sent, or a native allocation failure, is memory."""
    if returncode == -signal.SIGKILL or any(hint in stderr for hint in _MEMORY_HINTS):
        return SandboxError(
            f"the Python process ran out of memory (limit {limits.memory_mb} MB)",
            "python_memory",
            stdout=stdout,
        )
    if returncode == -signal.SIGSYS:
        return SandboxError(
            "the Python process was killed by the sandbox for a system call it refuses (SIGSYS)",
            "python_failed",
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
