"""The child side of `dagwright.data.sandbox`: run as a script (`python -I <this file> SCRATCH`),
never imported. It reads its job from SCRATCH/job.json, shuts itself in, loads the input
tables, runs the user's code and writes the outcome back into SCRATCH.

It imports nothing of dagwright on purpose: the user's code runs in this process, and the less
it finds loaded the less it can reach. The layers, outermost first:

- resource limits (CPU seconds, address space, file size, no core dumps);
- a network namespace of its own with no interfaces (`unshare(CLONE_NEWNET)`) when permitted;
- Landlock (a Linux security module any process may use on itself): reads only below the
  Python installation, the system libraries and the scratch folder, writes only in the scratch
  folder, no `execve` at all, no TCP bind/connect, no signals to processes outside;
- an audit hook (PEP 578) that refuses the same things at the Python level with a clear
  message, and process creation, sockets and ctypes besides.

The kernel layers are applied while the process is still single-threaded: both are inherited
by threads created later but never imposed on threads that already exist.
"""

from __future__ import annotations

import ctypes
import io
import json
import linecache
import math
import os
import resource
import sys
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any

USER_FILE = "<python>"  # the file name tracebacks give the user's code

# System locations that the dynamic loader and the time zone code read; nothing personal.
_SYSTEM_READ = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/lib",
    "/lib64",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/dev/null",
    "/dev/urandom",
)

# Audit events refused outright: other processes, the network, raw memory and native calls,
# and walking the object graph (which could reach the hook's own settings).
_REFUSED = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.posix_spawn",
        "os.spawn",
        "os.fork",
        "os.forkpty",
        "os.kill",
        "os.killpg",
        "pty.spawn",
        "socket.connect",
        "socket.bind",
        "socket.getaddrinfo",
        "socket.gethostbyname",
        "socket.gethostbyaddr",
        "socket.sendto",
        "socket.sendmsg",
        "urllib.Request",
        "webbrowser.open",
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.call_function",
        "ctypes.cdata",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "os.chdir",
    }
)
# Audit events whose path arguments (by position) must lie in the readable or writable areas.
_READ_PATHS = {"os.listdir": (0,), "os.scandir": (0,), "glob.glob": (0,)}
_WRITE_PATHS = {
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.rename": (0, 1),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "shutil.copyfile": (1,),
    "shutil.copytree": (1,),
    "shutil.move": (0, 1),
    "shutil.rmtree": (0,),
}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def main() -> None:
    scratch = os.path.realpath(sys.argv[1])
    # `python -I script` puts the script's folder (dagwright/data) first on sys.path, which
    # would let the user's code import the data layer's modules by their bare names.
    sys.path = [p for p in sys.path if p != os.path.dirname(os.path.abspath(__file__))]
    with open(os.path.join(scratch, "job.json"), encoding="utf-8") as handle:
        job = json.load(handle)
    limits = job["limits"]
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    size = limits["memory_mb"] * 1024 * 1024  # a file larger than memory is of no use here
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    read_roots = _read_roots(scratch)
    # Opened before Landlock closes /proc: the address-space limit is set after the imports.
    statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
    isolation = ["rlimits"]
    if _isolate_network():
        isolation.append("network_namespace")
    abi = _landlock(scratch, read_roots)
    if abi:
        isolation.append(f"landlock_abi_{abi}")
    isolation.append("audit_hook")

    import numpy as np
    import pandas as pd
    import pyarrow.parquet as pq

    # Limits count from here: the imports above are the sandbox's cost, not the user's.
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = math.ceil(usage.ru_utime + usage.ru_stime) + limits["cpu_s"]
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    memory = _virtual_size(statm) + size
    os.close(statm)
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    status: dict[str, Any] = {"isolation": isolation}
    stdout = _CappedWriter(sys.stdout, limits["max_stdout_chars"])
    sys.stdout = sys.stderr = stdout
    try:
        frames = {
            name: pq.read_table(os.path.join(scratch, file)).to_pandas()
            for name, file in job["tables"].items()
        }
        namespace: dict[str, Any] = {"__name__": "__sandbox__", "pd": pd, "np": np}
        namespace["tables"] = dict(frames)
        for name, frame in frames.items():
            if name.isidentifier() and name not in namespace:
                namespace[name] = frame
        code = job["code"]
        linecache.cache[USER_FILE] = (len(code), None, code.splitlines(True), USER_FILE)
        compiled = compile(code, USER_FILE, "exec")
        sys.addaudithook(_make_hook(scratch, read_roots))
        exec(compiled, namespace)
        status.update(_write_result(namespace.get("result"), scratch, limits, pd))
        status["ok"] = True
    except MemoryError as error:
        status.update(ok=False, kind="memory", message=_describe(error))
    except BaseException as error:  # everything the user's code raises is reported, exit too
        status.update(ok=False, kind="failed", message=_describe(error))
        status["traceback"] = _user_traceback(error)
    stdout.flush()
    with open(os.path.join(scratch, "status.json"), "w", encoding="utf-8") as handle:
        json.dump(status, handle)


class _CappedWriter(io.TextIOBase):
    """Passes text through to the real stdout until `limit` characters, then says once how the
    output was cut and drops the rest (a print loop must not fill the disk or the prompt)."""

    def __init__(self, target: Any, limit: int) -> None:
        self.target = target
        self.left = limit
        self.limit = limit
        self.cut = False

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        if self.left > 0:
            part = text[: self.left]
            self.target.write(part)
            self.left -= len(part)
            if len(part) < len(text):
                self._mark_cut()
        elif text and not self.cut:
            self._mark_cut()
        return len(text)

    def _mark_cut(self) -> None:
        self.cut = True
        self.target.write(f"\n... output cut at {self.limit} characters\n")

    def flush(self) -> None:
        self.target.flush()


def _read_roots(scratch: str) -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    candidates = [paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")]
    candidates += [p for p in sys.path if os.path.isdir(p)]
    candidates += [scratch, *_SYSTEM_READ]
    roots = {os.path.realpath(p) for p in candidates if os.path.exists(p)}
    return tuple(sorted(roots))


def _inside(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def _make_hook(scratch: str, read_roots: tuple[str, ...]) -> Callable[[str, tuple[Any, ...]], None]:
    write_roots = (scratch, "/dev/null")

    def check(value: Any, roots: tuple[str, ...], what: str) -> None:
        if value is None or isinstance(value, int):
            return  # a descriptor already opened, or the current folder (the scratch folder)
        path = os.path.realpath(os.fsdecode(value))
        if not _inside(path, roots):
            raise PermissionError(f"the sandbox refuses to {what} {path!r}")

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in _REFUSED:
            raise PermissionError(f"the sandbox refuses {event}")
        if event == "open":
            path, mode, flags = args
            writing = bool(flags & _WRITE_FLAGS) or any(c in (mode or "") for c in "wax+")
            if writing:
                check(path, write_roots, "write")
            else:
                check(path, read_roots, "read")
        elif event in _READ_PATHS:
            for index in _READ_PATHS[event]:
                check(args[index], read_roots, "list")
        elif event in _WRITE_PATHS:
            for index in _WRITE_PATHS[event]:
                check(args[index], write_roots, "change")

    return hook


def _isolate_network() -> bool:
    """A network namespace of its own: only a loopback that is down, so nothing to connect to.
    Root may create one directly; others only together with a user namespace, if allowed."""
    libc = ctypes.CDLL(None, use_errno=True)
    clone_newnet, clone_newuser = 0x40000000, 0x10000000
    if libc.unshare(clone_newnet) == 0:
        return True
    return bool(libc.unshare(clone_newnet | clone_newuser) == 0)


# Landlock (linux/landlock.h). The syscall numbers are the same on every architecture.
_LL_CREATE, _LL_ADD_RULE, _LL_RESTRICT = 444, 445, 446
_LL_EXECUTE, _LL_WRITE_FILE, _LL_READ_FILE, _LL_READ_DIR = 1, 2, 4, 8
_LL_FS_BY_ABI = {1: (1 << 13) - 1, 2: (1 << 14) - 1, 3: (1 << 15) - 1, 5: (1 << 16) - 1}
_LL_FILE_ONLY = _LL_EXECUTE | _LL_WRITE_FILE | _LL_READ_FILE | (1 << 14) | (1 << 15)


class _RulesetAttr(ctypes.Structure):
    _fields_ = (
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    )


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = (("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32))


def _landlock(scratch: str, read_roots: tuple[str, ...]) -> int:
    """Restricts this process (and every thread and child it makes later) for good. Returns
    the Landlock ABI version used, 0 when the kernel has no Landlock."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    abi = int(libc.syscall(_LL_CREATE, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))
    if abi < 1:
        return 0
    handled_fs = _LL_FS_BY_ABI[max(v for v in _LL_FS_BY_ABI if v <= abi)]
    attr = _RulesetAttr(handled_fs, 0, 0)
    size = 8
    if abi >= 4:  # TCP bind and connect: handled, and no rule allows any port
        attr.handled_access_net, size = 3, 16
    if abi >= 6:  # abstract unix sockets and signals outside this sandbox
        attr.scoped, size = 3, 24
    ruleset = int(libc.syscall(_LL_CREATE, ctypes.byref(attr), ctypes.c_size_t(size), 0))
    if ruleset < 0:
        return 0
    try:
        # No execute right anywhere: execve of any file fails in the kernel.
        read = _LL_READ_FILE | _LL_READ_DIR
        for root in read_roots:
            _allow(libc, ruleset, root, read)
        _allow(libc, ruleset, "/dev/null", read | _LL_WRITE_FILE)
        _allow(libc, ruleset, scratch, handled_fs & ~_LL_EXECUTE)
        pr_set_no_new_privs = 38
        if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
            return 0
        if libc.syscall(_LL_RESTRICT, ruleset, 0) != 0:
            return 0
    finally:
        os.close(ruleset)
    return abi


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, access: int) -> None:
    fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    try:
        if not os.path.isdir(path):
            access &= _LL_FILE_ONLY  # directory rights on a file rule are an error
        rule = _PathBeneathAttr(access, fd)
        path_beneath = 1
        libc.syscall(_LL_ADD_RULE, ruleset, path_beneath, ctypes.byref(rule), 0)
    finally:
        os.close(fd)


def _virtual_size(statm: int) -> int:
    pages = int(os.pread(statm, 200, 0).split()[0])
    return pages * os.sysconf("SC_PAGE_SIZE")


def _write_result(value: Any, scratch: str, limits: dict[str, int], pd: Any) -> dict[str, Any]:
    """Writes the value of `result`: a DataFrame or Series as Parquet (cut to max_output_rows),
    anything else as JSON. Returns what the parent needs to know about it."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if isinstance(value, pd.Series):
        value = value.to_frame(name=value.name if value.name is not None else "value")
    if isinstance(value, pd.DataFrame):
        limit = limits["max_output_rows"]
        truncated = len(value) > limit
        frame = value.head(limit)
        # A meaningful index (after groupby, set_index...) becomes columns; a plain 0..n-1 goes.
        if not isinstance(frame.index, pd.RangeIndex) or frame.index.name is not None:
            frame = frame.reset_index()
        frame.columns = [_column_name(c) for c in frame.columns]
        table = pa.Table.from_pandas(frame, preserve_index=False)
        pq.write_table(table.replace_schema_metadata(None), os.path.join(scratch, "result.parquet"))
        return {"result": "table", "truncated": truncated, "rows": len(value)}
    if value is None:
        return {"result": "none", "truncated": False}
    with open(os.path.join(scratch, "result.json"), "w", encoding="utf-8") as handle:
        json.dump(_to_json(value, pd), handle, allow_nan=False)
    return {"result": "json", "truncated": False}


def _column_name(name: Any) -> str:
    if isinstance(name, tuple):  # MultiIndex columns from agg(...) with several functions
        return "_".join(str(part) for part in name if str(part))
    return str(name)


def _to_json(value: Any, pd: Any) -> Any:
    """A JSON value from what pandas and numpy give: numpy scalars become Python ones, NaN and
    NaT become null, dates become ISO strings."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _to_json(v, pd) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_to_json(v, pd) for v in value]
    if hasattr(value, "tolist") and not hasattr(value, "isoformat"):  # arrays, numpy scalars
        return _to_json(value.tolist(), pd)
    if value is pd.NaT or value is pd.NA:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if type(value).__name__ == "Decimal":
        return float(value)
    raise TypeError(
        "result must be a DataFrame, a Series, or a JSON value (number, string, list, dict); "
        f"got {type(value).__name__}"
    )


def _describe(error: BaseException) -> str:
    text = "".join(traceback.format_exception_only(type(error), error)).strip().splitlines()
    message = text[-1] if text else type(error).__name__
    line = _user_line(error)
    return f"{message} (line {line})" if line is not None else message


def _user_line(error: BaseException) -> int | None:
    if isinstance(error, SyntaxError) and error.filename == USER_FILE:
        return error.lineno
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == USER_FILE]
    return frames[-1].lineno if frames else None


def _user_traceback(error: BaseException) -> str:
    """The traceback cut to the frames of the user's code: the sandbox's own frames and those
    deep inside pandas say nothing the user can act on."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename == USER_FILE]
    lines = ["Traceback (most recent call last):\n"] if frames else []
    lines += traceback.format_list(frames)
    lines += traceback.format_exception_only(type(error), error)
    return "".join(lines)


if __name__ == "__main__":
    main()
